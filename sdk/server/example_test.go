package server_test

// The examples run against the rtcd server TestMain starts; it sets
// RTCD_BASE_URL and RTCD_API_KEY for them.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"rtcd.dev/sdk/server"
)

func newClient() *server.Client {
	client, err := server.New(os.Getenv("RTCD_API_KEY"), server.WithBaseURL(os.Getenv("RTCD_BASE_URL")))
	if err != nil {
		log.Fatal(err)
	}
	return client
}

func ExampleNew() {
	for _, address := range []string{"https://rtc.example.com", "https://rtc.example.com/v1/", "https://rtc.example.com/v2", "https://example.com/rtc"} {
		client, err := server.New("sk_live_…", server.WithBaseURL(address), server.WithRetries(3), server.WithUserAgent("acme-backend/2.3"))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(client.BaseURL())
	}
	// Output:
	// https://rtc.example.com/v1
	// https://rtc.example.com/v1
	// https://rtc.example.com/v2
	// https://example.com/rtc/v1
}

func ExampleClient_CreateRoom() {
	ctx := context.Background()
	client := newClient()

	room, err := client.CreateRoom(ctx, &server.CreateRoomParams{
		Name:      server.String("standup"),
		ExpiresIn: server.Int(3600),
		Metadata:  server.Metadata{"team": "core"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*room.Name, room.Status, room.Region, room.MaxParticipants, room.Metadata["team"])
	fmt.Println(room.ExpiresAt.Sub(room.CreatedAt))

	ended, err := client.DeleteRoom(ctx, room.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*ended.EndReason)
	// Output:
	// standup waiting global 100 core
	// 1h0m0s
	// deleted
}

func ExampleClient_CreateParticipant() {
	ctx := context.Background()
	client := newClient()

	room, err := client.CreateRoom(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	session, err := client.CreateParticipant(ctx, room.ID, &server.CreateParticipantParams{
		ExternalID: server.String("user-42"),
		Name:       server.String("Ann"),
		Role:       server.String(server.RolePublisher),
	})
	if err != nil {
		log.Fatal(err)
	}
	// Hand session.Token to the client SDK; it is shown only here.
	fmt.Println(session.Status, session.Role, strings.HasPrefix(session.Token, "rtc_pt_"))
	// Output: created publisher true
}

func ExampleClient_ListRooms() {
	ctx := context.Background()
	client := newClient()

	if _, err := client.CreateRoom(ctx, nil); err != nil {
		log.Fatal(err)
	}
	newest, err := client.CreateRoom(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	page, err := client.ListRooms(ctx, 1) // newest first; no cursor
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Data), page.Data[0].ID == newest.ID, page.HasMore)
	// Output: 1 true true
}

func ExampleAPIError() {
	ctx := context.Background()
	client := newClient()

	_, err := client.GetRoom(ctx, "room_aaaaaaaaaaaaaaaaaaaaaaaa")
	var apiErr *server.APIError
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Status, apiErr.Code, strings.HasPrefix(apiErr.RequestID, "req_"))
	}

	_, err = client.CreateRoom(ctx, &server.CreateRoomParams{ExpiresIn: server.Int(5)})
	if errors.As(err, &apiErr) && apiErr.Code == server.CodeInvalidRequest {
		fmt.Println(apiErr.Status, apiErr.DetailString("field"))
	}
	// Output:
	// 404 room_not_found true
	// 400 expires_in
}

func ExampleVerifyWebhook() {
	secret := "whsec_YnooyT15O_7t8kx9Ry_mt3wVQ7rz62aVwL06iugKaCc" // from CreateWebhookEndpoint
	body := []byte(`{"id":"evt_akfi6y3jtxljmd7wzk3jmqfm","type":"room.ended","created_at":"2026-11-22T13:55:28.268Z",` +
		`"project_id":"prj_nu3vhxcbdps7rv2bkmqatu47","data":{"reason":"deleted","room_id":"room_jc4ikc6urwbvilvvepmb3dhv","sequence":1}}`)
	header := http.Header{}
	header.Set(server.HeaderWebhookTimestamp, "1795355728")
	header.Set(server.HeaderWebhookSignature, "v1=98e42ce6ff52f5f9f6e236bc40d435ffd05f4396806b456a192f4ec553f793a5")
	received := time.Unix(1795355728, 0).Add(2 * time.Second) // in a handler: time.Now()

	event, err := server.VerifyWebhook(secret, body, header, server.DefaultWebhookTolerance, received)
	if err != nil {
		log.Fatal(err)
	}
	var data struct {
		RoomID   string `json:"room_id"`
		Sequence int    `json:"sequence"`
	}
	if err := event.DecodeData(&data); err != nil {
		log.Fatal(err)
	}
	fmt.Println(event.ID, event.Type, data.RoomID, data.Sequence)

	// An altered body, and the same delivery replayed an hour later.
	_, err = server.VerifyWebhook(secret, append(body, ' '), header, 0, received)
	fmt.Println(errors.Is(err, server.ErrWebhookSignatureMismatch))
	_, err = server.VerifyWebhook(secret, body, header, 0, received.Add(time.Hour))
	fmt.Println(errors.Is(err, server.ErrWebhookTimestampOutsideTolerance))
	// Output:
	// evt_akfi6y3jtxljmd7wzk3jmqfm room.ended room_jc4ikc6urwbvilvvepmb3dhv 1
	// true
	// true
}

func ExampleSignWebhook() {
	// Sign a test delivery for your own receiver's tests.
	body := []byte(`{"id":"evt_test","type":"room.started","created_at":"2026-01-01T00:00:00.000Z","project_id":"prj_test","data":{}}`)
	now := time.Unix(1767225600, 0)
	header := http.Header{}
	header.Set(server.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	header.Set(server.HeaderWebhookSignature, server.SignWebhook("whsec_test", now.Unix(), body))

	event, err := server.VerifyWebhook("whsec_test", body, header, 0, now)
	fmt.Println(event.Type, err)
	// Output: room.started <nil>
}
