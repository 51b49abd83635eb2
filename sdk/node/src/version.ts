/** The SDK's version (semantic versioning, independent of rtcd's; see CHANGELOG.md). */
export const VERSION = "0.1.0";
