// Package dispatch delivers webhook events. The owners write each event
// into the outbox in the batch of the change that causes it; here one
// fan-out loop turns each outbox event into a delivery per subscribed,
// enabled endpoint of its project (read from the project's published
// core.ProjectGate, never asking the actor) and deletes it, in one durable
// batch, and one worker per endpoint owns that endpoint's deliveries: it
// starts those due (by the injected clock) in due order, so an endpoint's
// first attempts start in outbox order, keeps a sliding window of attempts
// in flight (growing on success, shrinking to one on failures), records
// the answered attempts in groups, one durable batch each, and applies
// manual retries itself. A slow or dead endpoint only delays itself; the
// attempts in flight over all endpoints are bounded by webhookConcurrency.
// Delivery is at least once.
//
// It imports core and no owner.
package dispatch
