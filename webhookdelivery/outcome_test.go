package webhookdelivery

import (
	"slices"
	"testing"

	"rtcd/metrics"
)

// Every outcome an attempt can have is a label value the metrics create at
// start, and nothing else is: the label stays a named, finite set.
func TestOutcomesAreTheMetricsLabels(t *testing.T) {
	outcomes := []string{OutcomeSucceeded, OutcomeHTTPError, OutcomeTimeout, OutcomeNetworkError, OutcomeRefused}
	if !slices.Equal(outcomes, metrics.WebhookAttemptOutcomes) {
		t.Fatalf("outcomes %v, metrics label values %v", outcomes, metrics.WebhookAttemptOutcomes)
	}
	// Attempts from another sender (no Outcome) still map into the set.
	for _, a := range []Attempt{{Success: true, StatusCode: 200}, {StatusCode: 502}, {Err: "boom"}, {Err: "x", Outcome: OutcomeTimeout}} {
		if !slices.Contains(outcomes, a.Result()) {
			t.Errorf("%+v has outcome %q", a, a.Result())
		}
	}
}
