import { RtcError } from "./errors.js";

/**
 * connectURL turns the API's origin into the connect address (spec 9.5):
 * trailing slashes and one trailing `/v1` are stripped, then `/v1/connect`
 * is added. `https://api.example.com`, `…/`, `…/v1` and `…/v1/` all give
 * `https://api.example.com/v1/connect`; any other path is kept
 * (`https://h/rtc` calls `https://h/rtc/v1/connect`), exactly as the Go
 * client does. An address that is not http(s), or that has a query or a
 * fragment, is `invalid_request`.
 */
export function connectURL(origin: string): string {
  let o = origin.trim();
  o = o.replace(/\/+$/, "");
  if (o.endsWith("/v1")) o = o.slice(0, -"/v1".length);
  o = o.replace(/\/+$/, "");
  let u: URL | undefined;
  try {
    u = new URL(o);
  } catch {
    u = undefined;
  }
  if (!u || (u.protocol !== "http:" && u.protocol !== "https:") || u.host === "" || u.search !== "" || u.hash !== "" || o.includes("?") || o.includes("#")) {
    throw new RtcError("invalid_request", "the API origin must be an http(s) address such as https://api.example.com", { origin });
  }
  return o + "/v1/connect";
}
