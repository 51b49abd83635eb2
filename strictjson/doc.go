// Package strictjson checks the raw bytes of a JSON body before it is
// decoded into a Go struct, in one pass, refusing what a decoder would
// silently accept or alter:
//
//   - invalid UTF-8 anywhere (a decoder would replace it with U+FFFD, and a
//     json.RawMessage field such as metadata would keep it raw): every byte
//     of a string is checked, and outside strings only ASCII JSON syntax
//     passes;
//   - \uD800-\uDFFF escapes that do not form a surrogate pair;
//   - duplicate keys in any object (a decoder keeps the last one);
//   - numbers that do not parse as a finite float64 (1e400);
//   - nesting deeper than MaxDepth;
//   - keys that are not exactly the json name of a field of the target
//     struct (a decoder matches names case-insensitively), at every level
//     that decodes into a struct. Values that decode into a map, an
//     interface or a json.RawMessage (metadata) take any keys.
//
// Type mismatches (a string where an integer belongs) are left to the
// decoder, which names the field and the expected type.
//
// Check allocates nothing on a body it accepts, except for an object of
// more than localKeys keys that takes any keys, whose key list outgrows its
// stack array: it runs on every request, POST /v1/connect included. Its
// messages speak of "the request body"; package http turns an Error into
// the invalid_request error of the API's envelope, with details.field.
//
// The package uses only the standard library and knows nothing of rtcd's
// request types: field names come from the target's struct tags, read the
// way encoding/json reads them.
package strictjson
