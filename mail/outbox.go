package mail

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"rtcd/clock"
)

const (
	// outboxDirPerm keeps the outbox private: messages carry sign-in links.
	outboxDirPerm = 0o700
	// outboxFilePerm is the mode of every .eml file (os.CreateTemp's).
	outboxFilePerm = 0o600
	// outboxSuffixBytes is the randomness that keeps two names written in
	// the same nanosecond apart.
	outboxSuffixBytes = 8
	// outboxTimeLayout starts every file name so names sort by time.
	outboxTimeLayout = "20060102T150405.000000000Z"
)

// OutboxSender is the embedded default Sender: it writes each message as an
// RFC 5322 .eml file into its directory and logs the recipient and subject
// (never the body). File names start with the UTC time, so they sort in the
// order written, and end in a random suffix and ".eml".
type OutboxSender struct {
	dir    string
	from   string
	clk    clock.Clock
	logger *slog.Logger
}

// NewOutboxSender returns an OutboxSender writing into dir (created with
// mode 0700 if missing) with from as the sender address.
func NewOutboxSender(dir string, from string, clk clock.Clock, logger *slog.Logger) (*OutboxSender, error) {
	from, err := ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("outbox from: %w", err)
	}
	if dir == "" {
		return nil, fmt.Errorf("mail: outbox directory is empty")
	}
	if err := os.MkdirAll(dir, outboxDirPerm); err != nil {
		return nil, fmt.Errorf("mail: create outbox: %w", err)
	}
	return &OutboxSender{dir: dir, from: from, clk: clk, logger: logger}, nil
}

// Dir returns the directory the sender writes into.
func (s *OutboxSender) Dir() string { return s.dir }

// Send renders m and writes it atomically (a temporary file, synced, then
// renamed) into the outbox.
func (s *OutboxSender) Send(ctx context.Context, m Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.clk.Now().UTC()
	msg, err := build(m, s.from, now)
	if err != nil {
		return err
	}
	data, err := render(msg)
	if err != nil {
		return err
	}
	suffix, err := randomHex(outboxSuffixBytes)
	if err != nil {
		return err
	}
	name := now.Format(outboxTimeLayout) + "-" + suffix + ".eml"
	if err := writeFileAtomic(filepath.Join(s.dir, name), data); err != nil {
		return err
	}
	s.logger.Info("mail written to outbox", "to", m.To, "subject", m.Subject, "file", name)
	return nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory, so a reader never sees a partial message.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*.part") // not *.eml: readers of the outbox must not pick it up
	if err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			_ = tmp.Close()
			_ = os.Remove(tmpName)
		}
	}()
	if err := tmp.Chmod(outboxFilePerm); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	ok = true
	return nil
}

// Compile-time check that OutboxSender is a Sender.
var _ Sender = (*OutboxSender)(nil)
