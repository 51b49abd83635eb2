package bench

import (
	"log/slog"
	"os"
	"testing"
)

// TestMain quiets the informational logs of the actor system and Pebble,
// which every engine start would otherwise print between benchmark lines.
// Warnings and errors still show.
func TestMain(m *testing.M) {
	slog.SetLogLoggerLevel(slog.LevelWarn)
	os.Exit(m.Run())
}
