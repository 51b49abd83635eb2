// Command join joins a room with a participant token, prints every event,
// and leaves on Ctrl-C (or SIGTERM) or after -for.
//
//	go run ./examples/join -api http://127.0.0.1:8080 -token rtc_pt_… -for 30s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"rtcd.dev/sdk/client"
)

func main() {
	api := flag.String("api", "http://127.0.0.1:8080", "API origin (a trailing /v1 is fine)")
	token := flag.String("token", "", "participant token (rtc_pt_…); default $RTCD_PARTICIPANT_TOKEN")
	stay := flag.Duration("for", 0, "leave after this long (0: until Ctrl-C)")
	verbose := flag.Bool("v", false, "log the SDK's operational messages")
	flag.Parse()
	if *token == "" {
		*token = os.Getenv("RTCD_PARTICIPANT_TOKEN")
	}
	if *token == "" {
		fmt.Fprintln(os.Stderr, "join: -token is required")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := []client.Option{}
	for _, name := range client.EventNames() {
		opts = append(opts, client.WithHandler(name, printEvent))
	}
	if *verbose {
		opts = append(opts, client.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	}
	s, err := client.Connect(ctx, *api, *token, opts...)
	if err != nil {
		var ce *client.Error
		if errors.As(err, &ce) {
			fmt.Fprintf(os.Stderr, "join: %s: %s", ce.Code, ce.Message)
			if ce.RetryAfter > 0 {
				fmt.Fprintf(os.Stderr, " (retry after %v)", ce.RetryAfter)
			}
			fmt.Fprintf(os.Stderr, " %v\n", ce.Debug)
		} else {
			fmt.Fprintln(os.Stderr, "join:", err)
		}
		os.Exit(1)
	}
	fmt.Printf("joined room %s as %s (session %s, role %s)\n", s.RoomID(), s.ParticipantID(), s.SessionID(), s.Role())

	var timeout <-chan time.Time
	if *stay > 0 {
		timeout = time.After(*stay)
	}
	select {
	case <-ctx.Done():
		fmt.Println("leaving (signal)")
	case <-timeout:
		fmt.Println("leaving (time is up)")
	case <-s.Done():
	}
	leaveCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Leave(leaveCtx); err != nil {
		fmt.Fprintln(os.Stderr, "join: leave:", err)
	}
	<-s.Done()
	if err := s.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "join: the session ended:", err)
		os.Exit(1)
	}
}

func printEvent(e client.Event) {
	line := e.Time.Format("15:04:05.000") + " " + e.Name
	switch e.Name {
	case client.EventStateChanged:
		line += fmt.Sprintf(" %s -> %s", e.PreviousState, e.State)
	case client.EventQualityChanged:
		line += fmt.Sprintf(" %s -> %s (rtt %v)", e.PreviousQuality, e.Quality, e.RTT)
	case client.EventReconnecting:
		line += fmt.Sprintf(" attempt %d in %v", e.Attempt, e.Delay.Round(time.Millisecond))
	case client.EventReconnected:
		line += fmt.Sprintf(" after %d attempt(s)", e.Attempt)
	case client.EventDisconnected:
		line += " reason=" + e.Reason
	case client.EventParticipantJoined, client.EventParticipantUpdated:
		line += fmt.Sprintf(" %s (%s) state=%s", e.Participant.ID, e.Participant.Role, e.Participant.State)
	case client.EventParticipantLeft:
		line += fmt.Sprintf(" %s reason=%s", e.Participant.ID, e.Reason)
	case client.EventTrackSubscribed, client.EventTrackUnsubscribed:
		line += fmt.Sprintf(" %s %s of %s", e.Track.Kind, e.Track.ID, e.Track.ParticipantID)
	}
	if e.Err != nil {
		line += fmt.Sprintf(" error=%s (%s)", e.Err.Code, e.Err.Message)
	}
	fmt.Println(line)
}
