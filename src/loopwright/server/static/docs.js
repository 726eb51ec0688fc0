// GET /docs: Redoc (vendor-docs/redoc.standalone.js, loaded before this) renders the server's
// own OpenAPI document.
Redoc.init(
  "/openapi.json",
  { expandResponses: "200,201,202", jsonSampleExpandLevel: 2, hideDownloadButton: false },
  document.getElementById("redoc"),
);
