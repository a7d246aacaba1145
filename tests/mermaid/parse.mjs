// Parse each Mermaid file named on the command line with Mermaid's own parser (no browser: jsdom
// stands in for the DOM Mermaid expects). Prints "FILE: ok TYPE" or "FILE: <first line of the error>";
// exits 1 if any file does not parse.
import fs from "node:fs";
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!DOCTYPE html><body></body>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
globalThis.DOMParser = dom.window.DOMParser;
globalThis.Element = dom.window.Element;

const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false });

let failed = 0;
for (const file of process.argv.slice(2)) {
  try {
    const result = await mermaid.parse(fs.readFileSync(file, "utf8"));
    console.log(`${file}: ok ${result.diagramType}`);
  } catch (error) {
    failed += 1;
    console.log(`${file}: ${String(error.message || error).split("\n")[0]}`);
  }
}
process.exit(failed ? 1 : 0);
