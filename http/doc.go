// Package http owns rtcd's public HTTP surface: the fasthttp router, request
// ids, authentication of bearer credentials, scope checks, strict JSON
// decoding, the limit query parameter, the Idempotency-Key header, and the
// error envelope. Handlers stay thin: parse, validate the shape, call one
// actors.Engine method, render. Every rule about state lives in package
// actors.
package http
