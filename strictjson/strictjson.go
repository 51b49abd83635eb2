package strictjson

import (
	"bytes"
	stdjson "encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth bounds how deeply a body may nest objects and arrays. Depth
// counts from the root: the body's own object is level 1, a field's object
// or array value (metadata, sdk, scopes) level 2, and so on, so metadata can
// nest at most MaxDepth-1 levels itself. docs/api.md lists it.
const MaxDepth = 16

// MaxBodyBytes is the largest body Check takes: key positions are kept as
// 32-bit offsets so that an object's key list stays small. rtcd's request
// bodies are bounded far below it (http.MaxRequestBodyBytes).
const MaxBodyBytes = 1<<31 - 1

// Error is a body Check refused. Message is for the client and names the
// field at fault. Field is that field's dotted path of JSON names from the
// root ("sdk.version"; a key inside a value that takes any keys is data and
// is not named), or "" when the fault is the body's own (its syntax, data
// after it, a top-level key that is not valid UTF-8).
type Error struct {
	Field   string
	Message string
	// TooDeep: the body nests objects and arrays deeper than MaxDepth.
	TooDeep bool
}

func (e *Error) Error() string { return e.Message }

// Check checks that body is exactly one JSON value, strict as described in
// the package comment, whose structure fits the Go type target points to
// (the type a decoder will decode body into; its schema is built once per
// type and cached). It allocates nothing on success, and only its error
// otherwise, except for large objects that take any keys.
func Check(body []byte, target any) *Error {
	return check(body, schemaOf(target))
}

// schemaKind says how the strict check treats a JSON value.
type schemaKind uint8

const (
	// schemaAny: any JSON value; objects take any keys. Also used for
	// scalar fields: a container there is a type error the decoder reports.
	schemaAny schemaKind = iota
	// schemaStruct: an object whose keys must be the struct's field names.
	schemaStruct
	// schemaArray: an array whose elements follow elem.
	schemaArray
)

// maxSeenBitFields is the most fields a struct can have for duplicate keys
// to be tracked in a bit set; larger structs use the key list.
const maxSeenBitFields = 64

// jsonSchema is what the strict check needs of a Go type: the exact field
// names of structs, reached through pointers, slices and arrays.
type jsonSchema struct {
	kind   schemaKind
	fields []schemaField  // schemaStruct
	index  map[string]int // schemaStruct with many fields; nil otherwise
	elem   *jsonSchema    // schemaArray
}

type schemaField struct {
	name   string
	schema *jsonSchema
}

var anySchema = &jsonSchema{kind: schemaAny}

// lookup returns the index of the field named exactly key (the raw content
// of a JSON string; escaped: it holds escapes), or -1.
func (s *jsonSchema) lookup(key []byte, escaped bool) int {
	if escaped {
		for i := range s.fields {
			if compareKeys(key, true, []byte(s.fields[i].name), false) == 0 {
				return i
			}
		}
		return -1
	}
	if s.index != nil {
		if i, ok := s.index[string(key)]; ok {
			return i
		}
		return -1
	}
	for i := range s.fields {
		if s.fields[i].name == string(key) {
			return i
		}
	}
	return -1
}

var (
	schemaCache     sync.Map // reflect.Type -> *jsonSchema
	unmarshalerType = reflect.TypeFor[stdjson.Unmarshaler]()
)

// schemaOf returns the (cached) schema of the value v points to.
func schemaOf(v any) *jsonSchema {
	t := reflect.TypeOf(v)
	if s, ok := schemaCache.Load(t); ok {
		return s.(*jsonSchema)
	}
	s := buildSchema(t, map[reflect.Type]*jsonSchema{})
	actual, _ := schemaCache.LoadOrStore(t, s)
	return actual.(*jsonSchema)
}

// buildSchema walks t once. building holds the structs being built, so a
// recursive type refers to its own node.
func buildSchema(t reflect.Type, building map[reflect.Type]*jsonSchema) *jsonSchema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return anySchema // json.RawMessage and custom decoders take any value
	}
	switch t.Kind() {
	case reflect.Struct:
		if s, ok := building[t]; ok {
			return s
		}
		s := &jsonSchema{kind: schemaStruct}
		building[t] = s
		addFields(s, t, building)
		if len(s.fields) > 8 {
			s.index = make(map[string]int, len(s.fields))
			for i, f := range s.fields {
				s.index[f.name] = i
			}
		}
		return s
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return anySchema // []byte: a base64 string
		}
		elem := buildSchema(t.Elem(), building)
		if elem == anySchema {
			return anySchema
		}
		return &jsonSchema{kind: schemaArray, elem: elem}
	}
	return anySchema // map, interface, scalar
}

// addFields adds t's JSON fields to s, following encoding/json's naming: the
// tag's name, else the Go field name; "-" skips; an untagged embedded struct
// contributes its own fields. Of several fields with one name, the first
// added is kept, and a struct's own fields are added before those its
// embedded structs promote, so an outer field wins over a promoted one.
func addFields(s *jsonSchema, t reflect.Type, building map[reflect.Type]*jsonSchema) {
	addFieldsOf(s, t, building, map[reflect.Type]bool{t: true})
}

// addFieldsOf is addFields; embedded holds the embedded structs on the way
// down, so a struct embedding itself ends the walk.
func addFieldsOf(s *jsonSchema, t reflect.Type, building map[reflect.Type]*jsonSchema, embedded map[reflect.Type]bool) {
	var promoted []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if !embedded[et] {
					promoted = append(promoted, et)
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if s.lookup([]byte(name), false) >= 0 {
			continue
		}
		s.fields = append(s.fields, schemaField{name: name, schema: buildSchema(f.Type, building)})
	}
	for _, et := range promoted {
		embedded[et] = true
		addFieldsOf(s, et, building, embedded)
		delete(embedded, et)
	}
}

// jsonProblem is what the strict check found wrong.
type jsonProblem uint8

const (
	jsonOK jsonProblem = iota
	jsonSyntax
	jsonTrailing
	jsonBadUTF8
	jsonLoneSurrogate
	jsonBadNumber
	jsonTooDeep
	jsonUnknownField
	jsonDuplicateKey
)

// keyRef locates the raw content of one object key in the body (at most
// MaxBodyBytes).
type keyRef struct {
	start, end int32
	escaped    bool
}

// localKeys is how many keys of one object are tracked without allocating;
// a larger object (that takes any keys) allocates its key list.
const localKeys = 32

// jsonScanner is one run of the strict check.
type jsonScanner struct {
	b       []byte
	pos     int
	depth   int
	problem jsonProblem
	// path holds the struct field names from the root to the current value;
	// only fields of struct schemas are named (a key inside metadata is data).
	path   [MaxDepth]string
	npath  int
	badKey []byte // the unknown or repeated key, unescaped
	// dupField: the repeated key is a struct field (else a key of an object
	// that takes any keys, such as metadata's).
	dupField bool
}

// check is Check with the schema given. It allocates only to build the
// error.
func check(body []byte, schema *jsonSchema) *Error {
	if len(body) > MaxBodyBytes {
		return &Error{Message: "the request body is too large to check"}
	}
	s := jsonScanner{b: body}
	ok := s.value(schema)
	if ok {
		s.skipSpace()
		if s.pos != len(s.b) {
			ok = s.fail(jsonTrailing)
		}
	}
	if !ok {
		if (s.problem == jsonSyntax || s.problem == jsonTrailing) && !utf8.Valid(body) {
			// Invalid UTF-8 outside strings: say so rather than "not JSON".
			s.problem, s.npath = jsonBadUTF8, 0
		}
		return s.err()
	}
	return nil
}

func (s *jsonScanner) fail(p jsonProblem) bool {
	s.problem = p
	return false
}

// field is the dotted path of the field at fault, "" when none is known.
func (s *jsonScanner) field() string {
	return strings.Join(s.path[:s.npath], ".")
}

// quoteKey renders a key for a message, shortened to 64 bytes.
func quoteKey(k []byte) string {
	if len(k) > 64 {
		k = k[:64]
		for len(k) > 0 && !utf8.Valid(k) {
			k = k[:len(k)-1]
		}
		return strconv.Quote(string(k)) + "…"
	}
	return strconv.Quote(string(k))
}

// invalidAt is a refusal about field, or about the body when field is "".
func invalidAt(field, message string) *Error {
	if field == "" {
		return &Error{Message: "the request body " + message}
	}
	return &Error{Field: field, Message: field + " " + message}
}

func (s *jsonScanner) err() *Error {
	field := s.field()
	switch s.problem {
	case jsonTrailing:
		return &Error{Message: "the request body must hold exactly one JSON object"}
	case jsonBadUTF8:
		return invalidAt(field, "must be valid UTF-8")
	case jsonLoneSurrogate:
		return invalidAt(field, `holds a \u escape of a lone UTF-16 surrogate (D800-DFFF without its pair)`)
	case jsonBadNumber:
		return invalidAt(field, "holds a number that is not a finite 64-bit floating-point value")
	case jsonTooDeep:
		e := invalidAt(field, "nests objects and arrays deeper than "+strconv.Itoa(MaxDepth)+" levels (counted from the request body)")
		e.TooDeep = true
		return e
	case jsonUnknownField:
		name := string(s.badKey)
		if field != "" {
			name = field + "." + name
		}
		return &Error{Field: name, Message: "unknown field " + quoteKey([]byte(name))}
	case jsonDuplicateKey:
		if s.dupField {
			name := string(s.badKey)
			if field != "" {
				name = field + "." + name
			}
			return &Error{Field: name, Message: "field " + quoteKey([]byte(name)) + " appears more than once"}
		}
		return invalidAt(field, "repeats the key "+quoteKey(s.badKey))
	}
	return &Error{Message: "the request body is not valid JSON"}
}

func (s *jsonScanner) skipSpace() {
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

// value checks the value at s.pos (after optional whitespace).
func (s *jsonScanner) value(schema *jsonSchema) bool {
	s.skipSpace()
	if s.pos >= len(s.b) {
		return s.fail(jsonSyntax)
	}
	switch c := s.b[s.pos]; c {
	case '{':
		return s.object(schema)
	case '[':
		return s.array(schema)
	case '"':
		_, _, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return s.number()
		}
		return s.fail(jsonSyntax)
	}
}

func (s *jsonScanner) literal(lit string) bool {
	if len(s.b)-s.pos < len(lit) || string(s.b[s.pos:s.pos+len(lit)]) != lit {
		return s.fail(jsonSyntax)
	}
	s.pos += len(lit)
	return true
}

func (s *jsonScanner) open() bool {
	s.depth++
	if s.depth > MaxDepth {
		return s.fail(jsonTooDeep)
	}
	s.pos++
	return true
}

// object checks the object at s.pos. Keys of a struct schema must be its
// field names, each at most once (a bit set when it fits); other objects
// collect their keys (in a local array while they fit) and look for repeats
// at the end.
func (s *jsonScanner) object(schema *jsonSchema) bool {
	if !s.open() {
		return false
	}
	isStruct := schema.kind == schemaStruct
	useBits := isStruct && len(schema.fields) <= maxSeenBitFields
	var seen uint64
	var local [localKeys]keyRef
	keys := local[:0]
	s.skipSpace()
	if s.pos < len(s.b) && s.b[s.pos] == '}' {
		s.pos++
		s.depth--
		return true
	}
	for {
		s.skipSpace()
		if s.pos >= len(s.b) || s.b[s.pos] != '"' {
			return s.fail(jsonSyntax)
		}
		keyStart := s.pos + 1
		key, escaped, ok := s.str()
		if !ok {
			return false
		}
		s.skipSpace()
		if s.pos >= len(s.b) || s.b[s.pos] != ':' {
			return s.fail(jsonSyntax)
		}
		s.pos++
		child := anySchema
		named := false
		if isStruct {
			i := schema.lookup(key, escaped)
			if i < 0 {
				s.badKey = unescape(key, escaped)
				return s.fail(jsonUnknownField)
			}
			if useBits {
				if seen&(1<<i) != 0 {
					s.badKey, s.dupField = unescape(key, escaped), true
					return s.fail(jsonDuplicateKey)
				}
				seen |= 1 << i
			}
			child = schema.fields[i].schema
			s.path[s.npath] = schema.fields[i].name // npath < depth <= MaxDepth
			s.npath++
			named = true
		}
		if !useBits {
			keys = append(keys, keyRef{int32(keyStart), int32(keyStart + len(key)), escaped})
		}
		if !s.value(child) {
			return false // the path stays, naming the field at fault
		}
		if named {
			s.npath--
		}
		s.skipSpace()
		if s.pos >= len(s.b) {
			return s.fail(jsonSyntax)
		}
		if c := s.b[s.pos]; c == ',' {
			s.pos++
			continue
		} else if c != '}' {
			return s.fail(jsonSyntax)
		}
		s.pos++
		break
	}
	if !useBits {
		if dup, ok := repeatedKey(s.b, keys); ok {
			s.badKey, s.dupField = unescape(s.b[dup.start:dup.end], dup.escaped), isStruct
			return s.fail(jsonDuplicateKey)
		}
	}
	s.depth--
	return true
}

// repeatedKey returns a key that occurs twice among keys, comparing them
// unescaped. It may reorder keys.
func repeatedKey(b []byte, keys []keyRef) (keyRef, bool) {
	cmp := func(x, y keyRef) int {
		return compareKeys(b[x.start:x.end], x.escaped, b[y.start:y.end], y.escaped)
	}
	if len(keys) <= localKeys {
		for i := 1; i < len(keys); i++ {
			for j := range i {
				sameLen := keys[i].end-keys[i].start == keys[j].end-keys[j].start
				if (sameLen || keys[i].escaped || keys[j].escaped) && cmp(keys[i], keys[j]) == 0 {
					return keys[i], true
				}
			}
		}
		return keyRef{}, false
	}
	slices.SortFunc(keys, cmp)
	for i := 1; i < len(keys); i++ {
		if cmp(keys[i], keys[i-1]) == 0 {
			return keys[i], true
		}
	}
	return keyRef{}, false
}

// compareKeys orders the raw contents of two JSON strings (checked by str)
// by their unescaped text: the order of their runes, which is the order of
// their UTF-8 bytes.
func compareKeys(a []byte, aEscaped bool, b []byte, bEscaped bool) int {
	if !aEscaped && !bEscaped {
		return bytes.Compare(a, b)
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var ra, rb rune
		ra, i = nextRune(a, i)
		rb, j = nextRune(b, j)
		if ra != rb {
			if ra < rb {
				return -1
			}
			return 1
		}
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	return 0
}

// nextRune decodes the character at raw[i] (raw is the content of a string
// str checked: escapes are well formed, surrogates paired, UTF-8 valid) and
// returns it with the index past it.
func nextRune(raw []byte, i int) (rune, int) {
	c := raw[i]
	if c >= utf8.RuneSelf {
		r, n := utf8.DecodeRune(raw[i:])
		return r, i + n
	}
	if c != '\\' {
		return rune(c), i + 1
	}
	switch raw[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r, _ := hex4(raw, i+2)
		if r >= 0xd800 && r <= 0xdbff {
			low, _ := hex4(raw, i+8)
			return 0x10000 + (r-0xd800)<<10 + (low - 0xdc00), i + 12
		}
		return r, i + 6
	}
	return rune(raw[i+1]), i + 2 // " \ /
}

// unescape returns the text of a string's raw content, for a message.
func unescape(raw []byte, escaped bool) []byte {
	if !escaped {
		return raw
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		var r rune
		r, i = nextRune(raw, i)
		out = utf8.AppendRune(out, r)
	}
	return out
}

func (s *jsonScanner) array(schema *jsonSchema) bool {
	if !s.open() {
		return false
	}
	elem := anySchema
	if schema.kind == schemaArray {
		elem = schema.elem
	}
	s.skipSpace()
	if s.pos < len(s.b) && s.b[s.pos] == ']' {
		s.pos++
		s.depth--
		return true
	}
	for {
		if !s.value(elem) {
			return false
		}
		s.skipSpace()
		if s.pos >= len(s.b) {
			return s.fail(jsonSyntax)
		}
		if c := s.b[s.pos]; c == ',' {
			s.pos++
			continue
		} else if c != ']' {
			return s.fail(jsonSyntax)
		}
		s.pos++
		break
	}
	s.depth--
	return true
}

// plainByte marks the bytes a string holds as they are: printable ASCII
// other than the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str checks the string at s.pos (its opening quote) and returns its raw
// content (between the quotes) and whether it holds escapes.
func (s *jsonScanner) str() (raw []byte, escaped, ok bool) {
	s.pos++
	start := s.pos
	for {
		for s.pos < len(s.b) && plainByte[s.b[s.pos]] {
			s.pos++
		}
		if s.pos >= len(s.b) {
			return nil, false, s.fail(jsonSyntax)
		}
		switch c := s.b[s.pos]; {
		case c == '"':
			raw = s.b[start:s.pos]
			s.pos++
			return raw, escaped, true
		case c == '\\':
			escaped = true
			if !s.escape() {
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, s.fail(jsonSyntax)
		default: // a multi-byte UTF-8 sequence
			r, size := utf8.DecodeRune(s.b[s.pos:])
			if r == utf8.RuneError && size <= 1 {
				return nil, false, s.fail(jsonBadUTF8)
			}
			s.pos += size
		}
	}
}

// escape checks the escape at s.pos (its backslash). A \u escape of a high
// surrogate must be followed by one of a low surrogate; a low one alone is
// refused.
func (s *jsonScanner) escape() bool {
	if s.pos+1 >= len(s.b) {
		return s.fail(jsonSyntax)
	}
	switch s.b[s.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.pos += 2
		return true
	case 'u':
	default:
		return s.fail(jsonSyntax)
	}
	r, ok := hex4(s.b, s.pos+2)
	if !ok {
		return s.fail(jsonSyntax)
	}
	s.pos += 6
	switch {
	case r >= 0xdc00 && r <= 0xdfff:
		return s.fail(jsonLoneSurrogate)
	case r >= 0xd800 && r <= 0xdbff:
		if s.pos+1 >= len(s.b) || s.b[s.pos] != '\\' || s.b[s.pos+1] != 'u' {
			return s.fail(jsonLoneSurrogate)
		}
		low, ok := hex4(s.b, s.pos+2)
		if !ok {
			return s.fail(jsonSyntax)
		}
		if low < 0xdc00 || low > 0xdfff {
			return s.fail(jsonLoneSurrogate)
		}
		s.pos += 6
	}
	return true
}

// hex4 parses the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number checks the number at s.pos against JSON's grammar, and that it is a
// finite float64 (1e400 is not; 1e-400 rounds to 0 and is).
func (s *jsonScanner) number() bool {
	start := s.pos
	simple := true // an integer of at most 15 digits: always finite
	if s.b[s.pos] == '-' {
		s.pos++
	}
	digits := s.digits()
	switch {
	case digits == 0:
		return s.fail(jsonSyntax)
	case digits > 1 && s.b[s.pos-digits] == '0':
		return s.fail(jsonSyntax) // a leading zero
	case digits > 15:
		simple = false
	}
	if s.pos < len(s.b) && s.b[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return s.fail(jsonSyntax)
		}
		simple = false
	}
	if s.pos < len(s.b) && (s.b[s.pos] == 'e' || s.b[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.b) && (s.b[s.pos] == '+' || s.b[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return s.fail(jsonSyntax)
		}
		simple = false
	}
	if simple {
		return true
	}
	// No copy: ParseFloat does not keep the string once it returns, and its
	// error (which does) is dropped here.
	num := s.b[start:s.pos]
	if _, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(num), len(num)), 64); err != nil {
		return s.fail(jsonBadNumber)
	}
	return true
}

func (s *jsonScanner) digits() int {
	start := s.pos
	for s.pos < len(s.b) && s.b[s.pos] >= '0' && s.b[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}
