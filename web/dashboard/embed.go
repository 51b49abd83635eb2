// Package dashboard holds rtcd's web dashboard as built files: dist/, made
// by `make web` from src/ (Preact and TypeScript, bundled by esbuild) and
// committed, so `go build ./cmd/rtcd` needs no Node. CI rebuilds dist/ and
// fails when it differs from the committed one (`make web-check`).
//
// It owns the files and their cache identities; the http package serves
// them (http/dashboard_pages.go).
package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"mime"
	"path"
	"strings"
)

//go:embed dist
var dist embed.FS

// Asset is one built file, ready to serve.
type Asset struct {
	Body        []byte
	ContentType string
	// Version is the first 16 hex digits of the body's SHA-256: the page
	// refers to /assets/<name>?v=<Version>, so a new build is a new URL
	// and an asset can be cached for good.
	Version string
}

var (
	assets = map[string]Asset{}
	index  []byte
)

func init() {
	entries, err := dist.ReadDir("dist")
	if err != nil {
		panic("dashboard: no dist/ embedded: " + err.Error())
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "index.html" {
			continue
		}
		body, err := dist.ReadFile("dist/" + e.Name())
		if err != nil {
			panic("dashboard: " + err.Error())
		}
		sum := sha256.Sum256(body)
		ctype := mime.TypeByExtension(path.Ext(e.Name()))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		assets[e.Name()] = Asset{Body: body, ContentType: ctype, Version: hex.EncodeToString(sum[:8])}
	}
	page, err := dist.ReadFile("dist/index.html")
	if err != nil {
		panic("dashboard: no dist/index.html embedded: " + err.Error())
	}
	// Point the page at the versioned URL of each asset it names.
	html := string(page)
	for name, a := range assets {
		html = strings.ReplaceAll(html, `"/assets/`+name+`"`, `"/assets/`+name+`?v=`+a.Version+`"`)
	}
	index = []byte(html)
}

// Index is the one page of the dashboard, whatever its address: the
// script draws what the address names.
func Index() []byte { return index }

// Lookup returns the built file name (as in /assets/<name>).
func Lookup(name string) (Asset, bool) {
	a, ok := assets[name]
	return a, ok
}
