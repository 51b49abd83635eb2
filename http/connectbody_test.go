package http

import (
	"reflect"
	"strings"
	"testing"

	"rtcd/actors"
	"rtcd/apierr"
)

// connectCorpus is bodies of POST /v1/connect: the ones clients send, and
// every refusal of the strict decoding.
var connectCorpus = []string{
	`{"token":"rtc_pt_abc.def","sdk":{"name":"web","version":"1.2.3","platform":"browser"}}`,
	`{"token":"rtc_pt_abc.def"}`,
	` {"sdk":{"platform":"ios"} , "token" : "t" } ` + "\n",
	`{"token":null}`, `{"token":"t","sdk":null}`, `{"sdk":{}}`, `{}`, `{"token":""}`,
	`{"token":"t","sdk":{"name":null,"version":"€uro","platform":"x\u007f"}}`,
	"{\"token\":\"t\",\"sdk\":{\"name\":\"\x7f\"}}",
	`{"token":"t\"q"}`, `{"token":"t\u0041"}`, `{"token":"\ud800"}`, `{"token":"\ud83d\ude00"}`,
	"{\"token\":\"a\xffb\"}", "{\"token\":\"a\tb\"}", "{\"\xff\":1}",
	`{"token":"a","token":"b"}`, `{"sdk":{"name":"a","name":"b"}}`, `{"sdk":{},"sdk":{}}`,
	`{"Token":"t"}`, `{"token":"t","room":"x"}`, `{"token":"t","sdk":{"os":"linux"}}`,
	`{"token":42}`, `{"token":true}`, `{"token":["t"]}`, `{"token":{"t":1}}`, `{"sdk":"web"}`, `{"sdk":[]}`,
	`{"sdk":{"name":1}}`, `{"sdk":{"name":{"a":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}}}`, `{"token":1e400}`,
	`{"token":"t"} {}`, `{"token":"t"}x`, `{"token":"t"`, `{"token":"t",}`, `{"token" "t"}`, `{,}`,
	`[]`, `"t"`, `null`, ``, ` `, `{`, `}`, `{"token":nul}`, `{"token":nullx}`, `{"sdk":nul}`,
	"\xef\xbb\xbf{\"token\":\"t\"}", `{"token":"t"}` + strings.Repeat(" ", 100),
	`{"token":"` + strings.Repeat("x", 4000) + `"}`,
}

// connectDecodedBy is what decodes a body: the outcome as comparable
// values (the params, or the error's code, status, message and details).
type connectOutcome struct {
	params *actors.ConnectParams
	err    *apierr.Error
}

func decodeConnectBoth(body []byte) (fast, generic connectOutcome) {
	var p actors.ConnectParams
	err := decodeConnect(body, []byte(jsonMediaType), &p)
	fast = connectOutcome{&p, err}
	var q actors.ConnectParams
	err = decodeBody(body, &q, false)
	generic = connectOutcome{&q, err}
	return fast, generic
}

func sameOutcome(a, b connectOutcome) bool {
	if (a.err == nil) != (b.err == nil) {
		return false
	}
	if a.err != nil {
		return a.err.Code == b.err.Code && a.err.Message == b.err.Message && reflect.DeepEqual(a.err.Details, b.err.Details) &&
			apierr.StatusOf(a.err) == apierr.StatusOf(b.err)
	}
	return reflect.DeepEqual(a.params, b.params)
}

// The one-pass connect decoder answers every body exactly as the generic
// strict decoding does: the same params, or the same refusal.
func TestConnectDecoderMatchesTheStrictDecoding(t *testing.T) {
	read := 0
	for _, body := range connectCorpus {
		fast, generic := decodeConnectBoth([]byte(body))
		if !sameOutcome(fast, generic) {
			t.Errorf("%q: one pass %+v %v, strict decoding %+v %v", body, fast.params, fast.err, generic.params, generic.err)
		}
		var p actors.ConnectParams
		if readConnect([]byte(body), &p) {
			read++
		}
	}
	if read < 8 {
		t.Fatalf("the one pass read only %d bodies of the corpus itself", read)
	}
}

func FuzzConnectDecoder(f *testing.F) {
	for _, body := range connectCorpus {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, generic := decodeConnectBoth(body)
		if !sameOutcome(fast, generic) {
			t.Fatalf("%q: one pass %+v %v, strict decoding %+v %v", body, fast.params, fast.err, generic.params, generic.err)
		}
	})
}

// The one pass allocates little: the strings it returns, the token's
// pointer, the sdk object (the generic decoding allocates several times
// more, and walks the body twice).
func TestConnectDecoderAllocations(t *testing.T) {
	body := []byte(`{"token":"rtc_pt_abc.def","sdk":{"name":"web","version":"1.2.3","platform":"browser"}}`)
	allocs := testing.AllocsPerRun(100, func() {
		var p actors.ConnectParams
		if err := decodeConnect(body, []byte(jsonMediaType), &p); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 8 {
		t.Fatalf("%v allocations per decode", allocs)
	}
}
