package server

// Version is the version of this SDK module (tag sdk/server/v0.1.0). It is
// sent in the User-Agent header of every request.
const Version = "0.1.0"

// APIVersion is the version of the rtcd API this SDK speaks (paths /v1).
const APIVersion = "v0.1"
