// Command main is built by e2e/openapi_clients_test.go in a module of its
// own, next to the package rtcdapi that oapi-codegen generates from
// docs/openapi.yaml: it creates a room through the generated client, finds
// it in the room list, and prints what it got as one JSON line. The types
// it names (the list page's next_cursor, WebhookEvent) must be generated
// as the document says, or this does not compile.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"rtcdclientcheck/rtcdapi"
)

func main() {
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(base, apiKey string) error {
	ctx := context.Background()
	auth := func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+apiKey)
		return nil
	}
	c, err := rtcdapi.NewClientWithResponses(base, rtcdapi.WithRequestEditorFn(auth))
	if err != nil {
		return err
	}
	name := "created by a client oapi-codegen generated"
	created, err := c.CreateRoomWithResponse(ctx, &rtcdapi.CreateRoomParams{}, rtcdapi.CreateRoomJSONRequestBody{Name: &name})
	if err != nil {
		return err
	}
	if created.JSON201 == nil {
		return fmt.Errorf("create room: %d %s", created.StatusCode(), created.Body)
	}
	room := created.JSON201
	list, err := c.ListRoomsWithResponse(ctx, &rtcdapi.ListRoomsParams{})
	if err != nil {
		return err
	}
	if list.JSON200 == nil {
		return fmt.Errorf("list rooms: %d %s", list.StatusCode(), list.Body)
	}
	listed := false
	for _, r := range list.JSON200.Data {
		listed = listed || r.Id == room.Id
	}
	var nextCursor *string = list.JSON200.Page.NextCursor // string or null, as the spec says
	var event rtcdapi.WebhookEvent                        // the body of a delivery is a generated type
	event.Type = rtcdapi.EventType("room.ended")
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"room_id": room.Id, "name": room.Name, "status": room.Status, "listed": listed,
		"next_cursor": nextCursor, "event_type": event.Type,
	})
}
