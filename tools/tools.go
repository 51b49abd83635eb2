//go:build tools

// Package tools pins the versions of programs the tests run but the
// service never links: stripe-mock, a fake Stripe API, and mailpit, an SMTP
// server whose HTTP API shows what it received. Keeping them in a module of
// their own keeps rtcd's go.mod lean; the build tag keeps this file out of
// every normal build.
package tools

import (
	_ "github.com/axllent/mailpit"
	_ "github.com/stripe/stripe-mock"
)
