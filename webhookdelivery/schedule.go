package webhookdelivery

import (
	"fmt"
	"time"
)

// DefaultScheduleSeconds is the default retry schedule: after the immediate
// first attempt fails, retry 10 s, 1 min, 5 min, 30 min, 2 h, 6 h and 24 h
// after each previous failed attempt (spec section 6), then give up. That is
// eight attempts over about 32.6 hours (117,370 s). Treat it as read-only;
// copy it to build another schedule.
var DefaultScheduleSeconds = []int{10, 60, 300, 1800, 7200, 21600, 86400}

// Bounds for a configured schedule, checked by ValidateSchedule.
const (
	// MaxScheduleRetries bounds the number of retries per delivery, so a
	// dead endpoint cannot keep a delivery alive indefinitely.
	MaxScheduleRetries = 32
	// MaxRetryDelaySeconds bounds one gap: seven days.
	MaxRetryDelaySeconds = 7 * 24 * 60 * 60
)

// NextAttemptAt returns when to make the next attempt after attempt number
// attempt (1 is the immediate first attempt) failed at last, and true; or
// false when that was the last attempt the schedule allows and the delivery
// is dead.
//
// schedule[i] is the delay in seconds after failed attempt i+1, so a schedule
// of n entries allows n+1 attempts. The delay counts from the previous
// attempt, not from the first. An attempt below 1 is treated as 1, and a
// negative delay as 0; configured schedules should pass ValidateSchedule.
//
// The result is a point in time, compared by the dispatcher against its
// injected clock: nothing here sleeps.
func NextAttemptAt(attempt int, last time.Time, schedule []int) (time.Time, bool) {
	attempt = max(attempt, 1)
	if attempt > len(schedule) {
		return time.Time{}, false
	}
	delaySeconds := max(schedule[attempt-1], 0)
	return last.Add(time.Duration(delaySeconds) * time.Second), true
}

// ValidateSchedule checks a configured retry schedule: at most
// MaxScheduleRetries entries, each 1..MaxRetryDelaySeconds. An empty
// schedule is valid and means a single attempt with no retries.
func ValidateSchedule(schedule []int) error {
	if len(schedule) > MaxScheduleRetries {
		return fmt.Errorf("webhooks: retry schedule has %d entries, at most %d allowed", len(schedule), MaxScheduleRetries)
	}
	for i, seconds := range schedule {
		if seconds < 1 || seconds > MaxRetryDelaySeconds {
			return fmt.Errorf("webhooks: retry %d delay %d s outside 1..%d s", i+1, seconds, MaxRetryDelaySeconds)
		}
	}
	return nil
}
