package client

// Version is the version of this SDK module (tag sdk/client/v0.1.0). It is
// sent as sdk.version in every connect request, with sdk.name SDKName.
const Version = "0.1.0"
