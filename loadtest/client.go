package main

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"
)

// HTTP client bounds.
const (
	httpTimeout         = 30 * time.Second
	httpMaxBodyBytes    = 1 << 20
	httpIdleConnTimeout = 60 * time.Second
	// httpExtraConns beyond the concurrency cover setup and metric scrapes.
	httpExtraConns = 16
)

// apiClient talks to one HTTP origin over keep-alive connections.
type apiClient struct {
	origin string // http://host:port
	hc     *fasthttp.HostClient
}

// parseOrigin accepts "host:port", "http://host:port" or "https://host:port".
func parseOrigin(addr string) (origin, hostPort string, tls bool, err error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", "", false, fmt.Errorf("address %q: want host:port or an http(s):// origin", addr)
	}
	hostPort = u.Host
	tls = u.Scheme == "https"
	if u.Port() == "" {
		if tls {
			hostPort += ":443"
		} else {
			hostPort += ":80"
		}
	}
	return u.Scheme + "://" + u.Host, hostPort, tls, nil
}

func newAPIClient(addr string, conns int) (*apiClient, error) {
	origin, hostPort, tls, err := parseOrigin(addr)
	if err != nil {
		return nil, err
	}
	return &apiClient{origin: origin, hc: &fasthttp.HostClient{
		Addr: hostPort, IsTLS: tls, Name: "rtcd-loadtest",
		MaxConns: conns + httpExtraConns, MaxConnWaitTimeout: httpTimeout,
		ReadTimeout: httpTimeout, WriteTimeout: httpTimeout, MaxIdleConnDuration: httpIdleConnTimeout,
		MaxResponseBodySize: httpMaxBodyBytes, NoDefaultUserAgentHeader: true,
		DisableHeaderNamesNormalizing: true, DisablePathNormalizing: true,
	}}, nil
}

// response is what a call returns. Body is only valid when the caller asked
// for it (keep true).
type response struct {
	Status int
	Code   string // the error envelope's code, "" on success
	Body   []byte
	Header map[string]string
}

// errEnvelope is the API's error body.
type errEnvelope struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call sends one request. headers are name, value pairs. keep copies the
// body out of fasthttp's buffers. A transport failure is returned as err
// and as a code (timeout, connection_refused, transport_error).
func (c *apiClient) call(method, path, key string, body []byte, keep bool, headers ...string) (response, error) {
	req := fasthttp.AcquireRequest()
	res := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.Header.SetMethod(method)
	req.SetRequestURI(c.origin + path)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if err := c.hc.Do(req, res); err != nil {
		return response{Code: transportCode(err)}, err
	}
	out := response{Status: res.StatusCode()}
	if out.Status >= 400 {
		var env errEnvelope
		if json.Unmarshal(res.Body(), &env) == nil && env.Error.Code != "" {
			out.Code = env.Error.Code
		} else {
			out.Code = "http_" + strconv.Itoa(out.Status)
		}
		if ra := res.Header.Peek("Retry-After"); len(ra) > 0 {
			out.Header = map[string]string{"Retry-After": string(ra)}
		}
		keep = true
	}
	if keep {
		out.Body = append([]byte(nil), res.Body()...)
	}
	return out, nil
}

// transportCode names a transport failure for the error counts.
func transportCode(err error) string {
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return "transport_timeout"
	case errors.Is(err, fasthttp.ErrNoFreeConns), errors.Is(err, fasthttp.ErrConnectionClosed):
		return "transport_" + strings.ReplaceAll(strings.ToLower(errTag(err)), " ", "_")
	case strings.Contains(err.Error(), "connection refused"):
		return "transport_connection_refused"
	case strings.Contains(err.Error(), "connection reset"):
		return "transport_connection_reset"
	}
	return "transport_error"
}

func errTag(err error) string {
	switch {
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return "no free conns"
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		return "connection closed"
	}
	return "error"
}

// errCode folds a call's outcome into the runner's "code|detail" form.
func errCode(r response, err error) string {
	if err != nil {
		return r.Code + "|" + err.Error()
	}
	if r.Code != "" {
		var env errEnvelope
		_ = json.Unmarshal(r.Body, &env)
		msg := env.Error.Message
		if msg == "" && len(r.Body) > 0 {
			msg = string(r.Body[:min(len(r.Body), 200)])
		}
		return r.Code + "|" + fmt.Sprintf("HTTP %d: %s", r.Status, msg)
	}
	return ""
}

// mustJSON marshals v (a value of this package's own shape).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
