// Builds the dashboard into dist/: one JavaScript bundle and one stylesheet,
// minified, with no source maps and no timestamps, so the same sources give
// the same bytes (CI rebuilds and compares them with the committed dist/).
// Usage: node build.mjs [outdir]   (default: dist)
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = process.argv[2] ?? join(here, "dist");
mkdirSync(outdir, { recursive: true });

await build({
  entryPoints: { app: join(here, "src/main.tsx") },
  outdir,
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2022", "chrome110", "firefox110", "safari16"],
  jsx: "automatic",
  jsxImportSource: "preact",
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
await build({
  entryPoints: { app: join(here, "src/app.css") },
  outdir,
  bundle: true,
  minify: true,
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
for (const file of ["index.html", "favicon.svg"]) {
  copyFileSync(join(here, "src", file), join(outdir, file));
}
