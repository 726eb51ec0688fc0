// Markdown for the assistant's replies: parsed by marked, sanitised by DOMPurify (no script, no
// event handler attributes, no javascript: URLs survive), code blocks highlighted by
// highlight.js. All three are vendored under vendor/ (their licences beside them): the page
// needs no network beyond its own server.

import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";
import hljs from "./vendor/hljs/core.min.js";
import bash from "./vendor/hljs/bash.min.js";
import css from "./vendor/hljs/css.min.js";
import diff from "./vendor/hljs/diff.min.js";
import javascript from "./vendor/hljs/javascript.min.js";
import json from "./vendor/hljs/json.min.js";
import python from "./vendor/hljs/python.min.js";
import shell from "./vendor/hljs/shell.min.js";
import sql from "./vendor/hljs/sql.min.js";
import typescript from "./vendor/hljs/typescript.min.js";
import xml from "./vendor/hljs/xml.min.js";
import yaml from "./vendor/hljs/yaml.min.js";

const LANGUAGES = { bash, css, diff, javascript, json, python, shell, sql, typescript, xml, yaml };
for (const [name, grammar] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, grammar);
const AUTO = Object.keys(LANGUAGES);

const marked = new Marked({ gfm: true, breaks: false, async: false });

// links open in a new tab, and tell the target nothing
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/** `text` as sanitised, highlighted Markdown: a document fragment to put in the page. */
export function markdown(text) {
  let html;
  try {
    html = marked.parse(String(text ?? ""));
  } catch {
    const plain = document.createDocumentFragment();
    plain.append(String(text ?? ""));
    return plain;
  }
  const fragment = DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select"],
    RETURN_DOM_FRAGMENT: true,
  });
  for (const code of fragment.querySelectorAll("pre > code")) highlight(code);
  for (const table of fragment.querySelectorAll("table")) {
    const wrap = document.createElement("div"); // a wide table scrolls in its own box
    wrap.className = "md-table";
    table.replaceWith(wrap);
    wrap.append(table);
  }
  return fragment;
}

function highlight(code) {
  const named = /(?:^|\s)language-([\w+-]+)/.exec(code.className);
  const language = named && hljs.getLanguage(named[1]) ? named[1] : null;
  const source = code.textContent;
  const result = language
    ? hljs.highlight(source, { language, ignoreIllegals: true })
    : hljs.highlightAuto(source, AUTO);
  // highlight.js escapes the source: its markup is spans with classes, nothing else
  code.innerHTML = DOMPurify.sanitize(result.value);
  code.classList.add("hljs");
  if (result.language) code.dataset.language = result.language;
}
