package client

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// SDKName is sent as sdk.name in the connect request.
const SDKName = "rtcd-go-client"

// ConnectTimeout bounds the whole connect: the token exchange plus the
// media connection and its join (spec 8). Each reconnect attempt has the
// same bound.
const ConnectTimeout = 15 * time.Second

// maxResponseBytes bounds the connect response read into memory.
const maxResponseBytes = 1 << 20

// connectURL turns an API origin into the connect address (spec 9.5):
// trailing slashes and a trailing /v1 are stripped, then /v1/connect is
// added. "https://api.example.com", ".../", ".../v1" and ".../v1/" all give
// https://api.example.com/v1/connect.
func connectURL(origin string) (string, error) {
	o := strings.TrimSpace(origin)
	o = strings.TrimRight(o, "/")
	o = strings.TrimSuffix(o, "/v1")
	o = strings.TrimRight(o, "/")
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", newError(CodeInvalidRequest, "the API origin must be an http(s) address such as https://api.example.com", err,
			map[string]any{"origin": origin})
	}
	return o + "/v1/connect", nil
}

// connectSession is the response of POST /v1/connect.
type connectSession struct {
	SessionID   string    `json:"session_id"`
	Endpoint    string    `json:"endpoint"`
	MediaToken  string    `json:"media_token"`
	ExpiresAt   time.Time `json:"expires_at"`
	Room        idObject  `json:"room"`
	Participant idObject  `json:"participant"`
	Features    Features  `json:"features"`
}

type idObject struct {
	ID string `json:"id"`
}

// Features says what the participant may publish (from its role).
type Features struct {
	Audio       bool `json:"audio"`
	Video       bool `json:"video"`
	ScreenShare bool `json:"screen_share"`
}

type connectRequest struct {
	Token string     `json:"token"`
	SDK   sdkRequest `json:"sdk"`
}

type sdkRequest struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Platform string `json:"platform"`
}

// exchange trades the participant token for a connect session.
func (s *Session) exchange(ctx context.Context) (*connectSession, *Error) {
	body, _ := json.Marshal(connectRequest{
		Token: s.participantToken.reveal(),
		SDK:   sdkRequest{Name: SDKName, Version: Version, Platform: s.cfg.platform},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.connectURL, bytes.NewReader(body))
	if err != nil {
		return nil, newError(CodeInvalidRequest, "could not build the connect request", err, nil)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", SDKName+"/"+Version)
	res, err := s.cfg.httpClient.Do(req)
	if err != nil {
		return nil, errorFromTransport(ctx, err, false)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return nil, errorFromTransport(ctx, err, false)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		e := errorFromAPI(res.StatusCode, res.Header, raw, s.cfg.clock.Now())
		s.cfg.logger.Debug("rtcd client: connect refused", "status", res.StatusCode, "code", e.Code, "request_id", e.Debug["request_id"])
		return nil, e
	}
	var cs connectSession
	if err := json.Unmarshal(raw, &cs); err != nil || cs.MediaToken == "" || cs.Endpoint == "" {
		return nil, newError(CodeUnknown, "the connect response is not a connect session", err,
			map[string]any{"http_status": res.StatusCode})
	}
	u, err := url.Parse(cs.Endpoint)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return nil, newError(CodeUnknown, "the connect response has no usable media endpoint", err,
			map[string]any{"endpoint": cs.Endpoint})
	}
	return &cs, nil
}
