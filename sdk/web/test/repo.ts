import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** repoFile is the path of a file of the repository (tests run from sdk/web/dist-test/test). */
export function repoFile(rel: string): string {
  return join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..", rel);
}
