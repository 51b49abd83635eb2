package strictjson

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// strictCase is one body for check: ok, or refused naming field ("": the
// body itself) with a message containing msg.
type strictCase struct {
	name, body string
	ok         bool
	field      string
	msg        string
}

func runStrict(t *testing.T, schema *jsonSchema, cases []strictCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := check([]byte(c.body), schema)
			if c.ok {
				if err != nil {
					t.Fatalf("refused %q: %v", c.body, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %q", c.body)
			}
			if err.Field != c.field {
				t.Errorf("%q: field %q, want %q (%v)", c.body, err.Field, c.field, err)
			}
			if err.TooDeep != strings.Contains(c.msg, "deeper") {
				t.Errorf("%q: TooDeep %v (%v)", c.body, err.TooDeep, err)
			}
			if !strings.Contains(err.Message, c.msg) {
				t.Errorf("%q: message %q lacks %q", c.body, err.Message, c.msg)
			}
		})
	}
}

// nest returns depth nested arrays around v.
func nest(depth int, v string) string {
	return strings.Repeat("[", depth) + v + strings.Repeat("]", depth)
}

// The test bodies have the shapes of rtcd's request bodies (actors'
// RoomParams, ConnectParams, APIKeyParams, TopupParams) without importing
// them: this package is a leaf. Package http tests the real types.
type (
	roomBody struct {
		Name            *string            `json:"name"`
		MaxParticipants *int               `json:"max_participants"`
		ExpiresIn       *int               `json:"expires_in"`
		Region          *string            `json:"region"`
		Metadata        stdjson.RawMessage `json:"metadata"`
	}
	connectBody struct {
		Token *string  `json:"token"`
		SDK   *sdkBody `json:"sdk"`
	}
	sdkBody struct {
		Name     string `json:"name"`
		Version  string `json:"version"`
		Platform string `json:"platform"`
	}
	apiKeyBody struct {
		Name   *string  `json:"name"`
		Scopes []string `json:"scopes"`
	}
	topupBody struct {
		Amount *string `json:"amount"`
		Method *string `json:"method"`
	}
)

func TestStrictJSONRoomBodies(t *testing.T) {
	room := schemaOf(&roomBody{})
	runStrict(t, room, []strictCase{
		{"empty object", `{}`, true, "", ""},
		{"every field", `{"name":"a","max_participants":5,"expires_in":600,"region":"global","metadata":{"k":[1,2.5,{"x":null,"y":"é"}]}}`, true, "", ""},
		{"whitespace", " {\n\t\"name\" : \"a\" ,\r\n\"metadata\":{ } } ", true, "", ""},
		{"wrong types are the decoder's business", `{"name":5,"max_participants":"x","metadata":[1]}`, true, "", ""},
		{"container where a scalar belongs", `{"name":{"any":{"keys":1}}}`, true, "", ""},
		{"escaped key matches", `{"n\u0061me":"a"}`, true, "", ""},
		{"unicode", `{"name":"日本語 😀 \u00e9 \ud83d\ude00 \uFFFD ` + "\uFFFD" + `"}`, true, "", ""},
		{"escapes", `{"name":"\" \\ \/ \b \f \n \r \t \u0000"}`, true, "", ""},

		// Invalid UTF-8, wherever it is.
		{"bad utf8 in name", "{\"name\":\"a\xffb\"}", false, "name", "valid UTF-8"},
		{"bad utf8 in metadata value", "{\"metadata\":{\"k\":\"\xc3\"}}", false, "metadata", "valid UTF-8"},
		{"bad utf8 in metadata key", "{\"metadata\":{\"\xfe\":1}}", false, "metadata", "valid UTF-8"},
		{"overlong encoding", "{\"name\":\"\xc0\xaf\"}", false, "name", "valid UTF-8"},
		{"utf8 encoded surrogate", "{\"name\":\"\xed\xa0\x80\"}", false, "name", "valid UTF-8"},
		{"truncated sequence at end", "{\"name\":\"\xe6\x97", false, "name", "valid UTF-8"},
		{"bad utf8 in top-level key", "{\"\xff\":1}", false, "", "valid UTF-8"},
		{"bad utf8 after the object", "{\"name\":\"a\"}\xff", false, "", "valid UTF-8"},
		{"bad utf8 between tokens", "{\"name\":\xc3\"a\"}", false, "", "valid UTF-8"},
		{"valid utf8 between tokens", "{\"name\":\xc3\xa9\"a\"}", false, "", "not valid JSON"},
		{"valid utf8 outside strings", "{\"name\":\"a\"}\u00a0", false, "", "exactly one"},

		// Lone surrogate escapes.
		{"lone high", `{"name":"\ud800"}`, false, "name", "surrogate"},
		{"lone low", `{"name":"\udc00"}`, false, "name", "surrogate"},
		{"high then letter", `{"name":"\ud800x"}`, false, "name", "surrogate"},
		{"high then non-surrogate escape", `{"name":"\ud800\u0041"}`, false, "name", "surrogate"},
		{"high then high", `{"name":"\ud800\ud800"}`, false, "name", "surrogate"},
		{"reversed pair", `{"name":"\ude00\ud83d"}`, false, "name", "surrogate"},
		{"high at end of string", `{"name":"a\uDBFF"}`, false, "name", "surrogate"},
		{"lone in metadata", `{"metadata":{"k":["\ud800"]}}`, false, "metadata", "surrogate"},
		{"lone in metadata key", `{"metadata":{"\udfff":1}}`, false, "metadata", "surrogate"},

		// Duplicate keys.
		{"duplicate field", `{"name":"a","name":"b"}`, false, "name", "more than once"},
		{"duplicate field escaped", `{"name":"a","\u006eame":"b"}`, false, "name", "more than once"},
		{"duplicate metadata key", `{"metadata":{"a":1,"b":2,"a":3}}`, false, "metadata", `repeats the key "a"`},
		{"duplicate nested metadata key", `{"metadata":{"a":{"x":1,"x":1}}}`, false, "metadata", `"x"`},
		{"duplicate metadata key escaped", `{"metadata":{"é":1,"\u00e9":2}}`, false, "metadata", "repeats the key"},
		{"duplicate metadata key among many", `{"metadata":{` + manyKeys(40) + `,"k7":0}}`, false, "metadata", `"k7"`},
		{"duplicate escaped among many", `{"metadata":{` + manyKeys(40) + `,"\u006b39":0}}`, false, "metadata", `"k39"`},
		{"many distinct keys", `{"metadata":{` + manyKeys(200) + `}}`, true, "", ""},
		{"many distinct escaped keys", `{"metadata":{` + manyKeys(40) + `,"\u006b40":0,"k\u00e9":1,"k\/":2,"k/0":3}}`, true, "", ""},
		{"same key in sibling objects", `{"metadata":{"a":{"x":1},"b":{"x":2},"c":[{"x":1},{"x":2}]}}`, true, "", ""},
		{"same key at several levels", `{"metadata":{"x":{"x":{"x":1}}}}`, true, "", ""},
		{"key after nested object", `{"metadata":{"a":{"b":1,"c":2},"b":1,"c":{"a":1}}}`, true, "", ""},
		{"duplicate after nested object", `{"metadata":{"a":{"b":1},"b":1,"a":2}}`, false, "metadata", `"a"`},

		// Numbers.
		{"max float", `{"metadata":{"n":1.7976931348623157e308}}`, true, "", ""},
		{"big integer kept", `{"metadata":{"n":123456789012345678901234567890}}`, true, "", ""},
		{"underflow rounds to zero", `{"metadata":{"n":1e-400}}`, true, "", ""},
		{"negative zero", `{"metadata":{"n":-0,"m":-0.0e+0}}`, true, "", ""},
		{"1e400", `{"metadata":{"n":1e400}}`, false, "metadata", "finite"},
		{"-1e400", `{"metadata":{"n":-1e400}}`, false, "metadata", "finite"},
		{"just over max float", `{"metadata":{"n":1.8e308}}`, false, "metadata", "finite"},
		{"400 digits", `{"metadata":{"n":` + "1" + strings.Repeat("0", 400) + `}}`, false, "metadata", "finite"},
		{"1e400 in a field", `{"max_participants":1e400}`, false, "max_participants", "finite"},
		{"leading zero", `{"expires_in":0600}`, false, "", "not valid JSON"},
		{"plus sign", `{"expires_in":+1}`, false, "", "not valid JSON"},
		{"bare dot", `{"expires_in":1.}`, false, "", "not valid JSON"},
		{"dot first", `{"expires_in":.5}`, false, "", "not valid JSON"},
		{"bare exponent", `{"expires_in":1e}`, false, "", "not valid JSON"},
		{"minus alone", `{"expires_in":-}`, false, "", "not valid JSON"},
		{"NaN", `{"expires_in":NaN}`, false, "", "not valid JSON"},
		{"Infinity", `{"expires_in":Infinity}`, false, "", "not valid JSON"},
		{"hex", `{"expires_in":0x10}`, false, "", "not valid JSON"},

		// Depth, counted from the body's object (level 1).
		{"depth 16", `{"metadata":` + nest(15, "1") + `}`, true, "", ""},
		{"depth 16 objects", `{"metadata":` + strings.Repeat(`{"a":`, 15) + "1" + strings.Repeat("}", 15) + `}`, true, "", ""},
		{"depth 17", `{"metadata":` + nest(16, "1") + `}`, false, "metadata", "deeper than 16"},
		{"depth 17 objects", `{"metadata":` + strings.Repeat(`{"a":`, 16) + "1" + strings.Repeat("}", 16) + `}`, false, "metadata", "deeper than 16"},
		{"depth 2000", `{"metadata":` + nest(2000, "") + `}`, false, "metadata", "deeper"},
		{"depth 20000 truncated", `{"metadata":` + strings.Repeat("[", 20000), false, "metadata", "deeper"},

		// Field names: exact json names only.
		{"upper case", `{"NAME":"x"}`, false, "NAME", `unknown field "NAME"`},
		{"title case", `{"Name":"x"}`, false, "Name", "unknown field"},
		{"go field name", `{"MaxParticipants":5}`, false, "MaxParticipants", "unknown field"},
		{"unknown", `{"bogus":1}`, false, "bogus", `unknown field "bogus"`},
		{"unknown after known", `{"name":"a","project_id":"p"}`, false, "project_id", "unknown field"},
		{"metadata takes any keys", `{"metadata":{"NAME":1,"Name":2,"name":3,"":4}}`, true, "", ""},

		// Syntax.
		{"truncated", `{"name":"a"`, false, "", "not valid JSON"},
		{"trailing comma", `{"name":"a",}`, false, "", "not valid JSON"},
		{"single quotes", `{'name':'a'}`, false, "", "not valid JSON"},
		{"raw control char", "{\"name\":\"a\tb\"}", false, "", "not valid JSON"},
		{"bad escape", `{"name":"\x41"}`, false, "", "not valid JSON"},
		{"short unicode escape", `{"name":"\u12"}`, false, "", "not valid JSON"},
		{"bad hex", `{"name":"\u12G4"}`, false, "", "not valid JSON"},
		{"two objects", `{}{}`, false, "", "exactly one"},
		{"object then garbage", `{"name":"a"} x`, false, "", "exactly one"},
		{"missing colon", `{"name" "a"}`, false, "", "not valid JSON"},
		{"bad literal", `{"metadata":{"a":tru}}`, false, "", "not valid JSON"},
		{"empty", ``, false, "", "not valid JSON"},
	})
}

// manyKeys is n distinct "kI":I members.
func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + itoa(i) + `":` + itoa(i))
	}
	return b.String()
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestStrictJSONNestedStructs(t *testing.T) {
	connect := schemaOf(&connectBody{})
	runStrict(t, connect, []strictCase{
		{"typical", `{"token":"pt_x","sdk":{"name":"js","version":"1.0.0","platform":"web"}}`, true, "", ""},
		{"sdk null", `{"token":"x","sdk":null}`, true, "", ""},
		{"sdk wrong type left to the decoder", `{"token":"x","sdk":[{"whatever":1}]}`, true, "", ""},
		{"unknown nested", `{"token":"x","sdk":{"extra":"y"}}`, false, "sdk.extra", `unknown field "sdk.extra"`},
		{"case nested", `{"token":"x","sdk":{"Name":"y"}}`, false, "sdk.Name", "unknown field"},
		{"case top", `{"Token":"x"}`, false, "Token", "unknown field"},
		{"duplicate nested", `{"sdk":{"name":"a","name":"b"}}`, false, "sdk.name", "more than once"},
		{"duplicate sdk", `{"sdk":{},"sdk":{}}`, false, "sdk", "more than once"},
		{"bad utf8 nested", "{\"sdk\":{\"version\":\"\x80\"}}", false, "sdk.version", "UTF-8"},
		{"surrogate nested", `{"sdk":{"platform":"\udc00"}}`, false, "sdk.platform", "surrogate"},
		{"depth under a scalar field", `{"token":` + nest(15, "") + `}`, true, "", ""},
		{"too deep under a scalar field", `{"token":` + nest(16, "") + `}`, false, "token", "deeper"},
	})
	keys := schemaOf(&apiKeyBody{})
	runStrict(t, keys, []strictCase{
		{"scopes", `{"name":"k","scopes":["rooms:read","rooms:read"]}`, true, "", ""},
		{"bad utf8 in scopes", "{\"scopes\":[\"\xff\"]}", false, "scopes", "UTF-8"},
		{"case", `{"Scopes":[]}`, false, "Scopes", "unknown field"},
	})
	topup := schemaOf(&topupBody{})
	runStrict(t, topup, []strictCase{
		{"ok", `{"amount":"10.00","method":"card"}`, true, "", ""},
		{"case", `{"AMOUNT":"10.00"}`, false, "AMOUNT", "unknown field"},
	})
}

// Schema building follows encoding/json's field naming.
func TestStrictJSONSchemaBuilding(t *testing.T) {
	type inner struct {
		Deep string `json:"deep"`
	}
	type Embedded struct {
		Promoted string `json:"promoted"`
		Shadowed string `json:"label"` // hidden by tree.Label
		*Embedded
	}
	type tree struct {
		Embedded
		Label    string             `json:"label,omitempty"`
		Plain    int                // no tag: the Go name, exactly
		Skipped  int                `json:"-"`
		Dash     int                `json:"-,"` // named "-"
		Children []*tree            `json:"children"`
		Items    [2]inner           `json:"items"`
		Attrs    map[string]inner   `json:"attrs"`
		Raw      stdjson.RawMessage `json:"raw"`
		Any      any                `json:"any"`
		Bytes    []byte             `json:"bytes"`
		hidden   int                //nolint:unused
	}
	s := schemaOf(&tree{})
	if s2 := schemaOf(&tree{}); s2 != s {
		t.Error("schema not cached")
	}
	runStrict(t, s, []strictCase{
		{"all", `{"promoted":"p","label":"l","Plain":1,"-":2,"children":[{"label":"c","children":[]}],"items":[{"deep":"d"}],"attrs":{"X":{"any":1}},"raw":{"R":1},"any":{"A":[{"B":1}]},"bytes":"AA=="}`, true, "", ""},
		{"promoted case", `{"Promoted":"p"}`, false, "Promoted", "unknown field"},
		{"shadowed twice", `{"label":"a","label":"b"}`, false, "label", "more than once"},
		{"plain lower", `{"plain":1}`, false, "plain", "unknown field"},
		{"skipped", `{"Skipped":1}`, false, "Skipped", "unknown field"},
		{"hidden", `{"hidden":1}`, false, "hidden", "unknown field"},
		{"recursive unknown", `{"children":[{"children":[{"Label":"x"}]}]}`, false, "children.children.Label", "unknown field"},
		{"array of struct unknown", `{"items":[{"deep":"a"},{"DEEP":"b"}]}`, false, "items.DEEP", "unknown field"},
		{"array of struct duplicate", `{"items":[{"deep":"a","deep":"b"}]}`, false, "items.deep", "more than once"},
		{"map duplicate", `{"attrs":{"a":{},"a":{}}}`, false, "attrs", "repeats the key"},
	})
}

// compareKeys orders escaped keys by their text, as bytes.Compare orders
// the text.
func TestCompareKeys(t *testing.T) {
	texts := []string{``, `a`, `b`, `ab`, `é`, `e`, `\u0000`, `😀`, `\uffff`, `k/`, `k\/`, `\"`, `z\n`, `日本`, `\ud83d\ude00`, `\u00e9`}
	for _, x := range texts {
		for _, y := range texts {
			var tx, ty string
			if err := stdjson.Unmarshal([]byte(`"`+x+`"`), &tx); err != nil {
				t.Fatal(err)
			}
			if err := stdjson.Unmarshal([]byte(`"`+y+`"`), &ty); err != nil {
				t.Fatal(err)
			}
			// Spell each with escapes too.
			ex, _ := stdjson.Marshal(tx)
			ey := []byte(`"` + escapeAll(ty) + `"`)
			want := strings.Compare(tx, ty)
			for _, c := range []struct {
				a, b   []byte
				ae, be bool
			}{
				{[]byte(x), []byte(y), strings.Contains(x, `\`), strings.Contains(y, `\`)},
				{ex[1 : len(ex)-1], ey[1 : len(ey)-1], true, true},
			} {
				if got := compareKeys(c.a, c.ae, c.b, c.be); got != want {
					t.Errorf("compareKeys(%s, %s) = %d, want %d", c.a, c.b, got, want)
				}
			}
		}
	}
}

// escapeAll spells every character of s as a \u escape (a surrogate pair
// beyond U+FFFF).
func escapeAll(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04X`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// Check must not allocate on a valid connect body: it runs on every POST
// /v1/connect. Measured through Check, so the schema cache lookup counts.
func TestStrictJSONConnectAllocs(t *testing.T) {
	body := []byte(benchConnectBody)
	var cb connectBody
	if n := testing.AllocsPerRun(100, func() {
		if err := Check(body, &cb); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per check, want 0", n)
	}
	room := []byte(`{"name":"a","expires_in":600,"metadata":{"k":[1,2.5e3,{"x":null,"y":"é"}],"\u00e9":"\ud83d\ude00"}}`)
	var rb roomBody
	if n := testing.AllocsPerRun(100, func() {
		if err := Check(room, &rb); err != nil {
			t.Fatal(err)
		}
	}); n > 0 {
		t.Errorf("%v allocations per room check, want 0", n)
	}
}

const benchConnectBody = `{"token":"pt_v1.eyJwcmoiOiJwcmpfd252NWtueWJ0NXlsMzN4cWk1ZndyaWsiLCJyb29tIjoicm9vbV9laXh4eWIzbmMzdnEyeGo1ZXljanRtNWkiLCJwYXJ0IjoicGFydF9hYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3giLCJleHAiOjE3OTM0NTYwMDB9.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl","sdk":{"name":"rtcd-js","version":"1.4.2","platform":"web"}}`

// BenchmarkStrictJSONConnect is the strict check alone on a typical connect
// body.
func BenchmarkStrictJSONConnect(b *testing.B) {
	body := []byte(benchConnectBody)
	schema := schemaOf(&connectBody{})
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := check(body, schema); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzStrictJSON: the check never panics, and whatever it accepts is valid
// UTF-8, valid JSON that encoding/json decodes (it refuses non-finite
// numbers), nested at most MaxDepth deep, without lone surrogates.
func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"metadata":{"k":[1,2.5,{"x":null,"y":"é"}]}}`, benchConnectBody,
		`{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":1e400}`, `{"a":1,"a":2}`,
		nest(17, ""), `[1,2,[3,{"b":-0.5e-3}]]`, `"x"`, `123`, `null`, `{"sdk":{"name":"x"}}`,
		`{"token":"x","sdk":{"extra":1}}`, `{"\u0061":1,"a":2}`, `{"a":"\u0000\n\\"}`,
	} {
		f.Add([]byte(s))
	}
	schemas := []*jsonSchema{anySchema, schemaOf(&connectBody{}), schemaOf(&roomBody{})}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, schema := range schemas {
			if err := check(data, schema); err != nil {
				if err.Message == "" {
					t.Fatalf("%q: refused without a message", data)
				}
				continue
			}
			if !utf8.Valid(data) {
				t.Fatalf("accepted invalid UTF-8 %q", data)
			}
			var v any
			if err := stdjson.Unmarshal(data, &v); err != nil {
				t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
			}
			if d := depthOf(v); d > MaxDepth {
				t.Fatalf("accepted depth %d: %q", d, data)
			}
			// Re-encoding what was decoded loses nothing: no U+FFFD
			// appears that the input did not spell out.
			if !bytes.Contains(data, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`)) {
				out, _ := stdjson.Marshal(v)
				if bytes.Contains(out, []byte("\uFFFD")) || bytes.Contains(out, []byte(`\ufffd`)) {
					t.Fatalf("accepted %q, which decodes with replacement characters", data)
				}
			}
		}
	})
}

func depthOf(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	case []any:
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}
