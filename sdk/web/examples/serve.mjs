// Serves the example on http://localhost:8000/examples/ (a browser gives
// camera and microphone to localhost and https pages only): the example's
// files and the SDK's bundle, nothing else. Usage, from the repository
// root: npm run example --workspace sdk/web [-- PORT]
import { createReadStream, existsSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const port = Number(process.argv[2] ?? 8000);
const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".map": "application/json" };
const served = ["examples/", "dist-bundle/"];

createServer((req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url ?? "/", "http://localhost").pathname)).replace(/^\/+/, "");
  if (path === "" || path === "." || path === "examples") {
    res.writeHead(302, { Location: "/examples/" });
    res.end();
    return;
  }
  const file = join(root, path.endsWith("/") ? join(path, "index.html") : path);
  if (!served.some((p) => path.startsWith(p)) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404);
    res.end();
    return;
  }
  res.writeHead(200, { "Content-Type": types[extname(file)] ?? "application/octet-stream", "Cache-Control": "no-cache" });
  createReadStream(file).pipe(res);
}).listen(port, "localhost", () => console.log(`the example: http://localhost:${port}/examples/`));
