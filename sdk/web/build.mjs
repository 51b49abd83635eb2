// Bundles the SDK into one ES module, rtcd-web.js, for pages that load it
// without a bundler of their own: the examples (examples/) and the browser
// tests (e2e/websdk_browser_test.go). Applications use the package itself
// (dist/, built by tsc) through their own bundler.
// Usage: node build.mjs [outdir]   (default: dist-bundle)
import { build } from "esbuild";
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = process.argv[2] ?? join(here, "dist-bundle");
mkdirSync(outdir, { recursive: true });

await build({
  entryPoints: { "rtcd-web": join(here, "src/index.ts") },
  outdir,
  bundle: true,
  format: "esm",
  target: ["es2022", "chrome110", "firefox110", "safari16"],
  sourcemap: "linked",
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
