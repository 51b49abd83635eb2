/** The SDK's name, sent as `sdk.name` in every connect request. */
export const SDK_NAME = "rtcd-web";

/**
 * The SDK's version (semantic versioning, spec 9.4; see CHANGELOG.md), sent
 * as `sdk.version` in every connect request. Kept equal to package.json's
 * by a unit test.
 */
export const VERSION = "0.1.0";
