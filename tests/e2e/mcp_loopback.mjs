// Preloaded (node --import) into MCP's reference server for the tests: its HTTP server listens on
// 127.0.0.1 only (it would take every interface), and the port it got (PORT=0: a free one) is
// printed on stderr as "loopback port N", which the test waits for.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || typeof args[0] === "string") {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  }
  this.once("listening", () => console.error(`loopback port ${this.address().port}`));
  return listen.apply(this, args);
};
