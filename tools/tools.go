//go:build tools

// Package tools pins the versions of programs the tests run but the
// service never links: stripe-mock, a fake Stripe API; mailpit, an SMTP
// server whose HTTP API shows what it received; and oapi-codegen, which
// generates a Go client from docs/openapi.yaml, with the runtime library
// that client imports (e2e/openapi_clients_test.go). The module also holds
// promqlcheck, which parses the PromQL of deploy/ with Prometheus's own
// parser (e2e/deploy_metrics_test.go), and etcd (tools/etcd: etcd's own
// server, the cluster tests' membership store). Keeping them in a module of
// their own keeps rtcd's go.mod lean; the build tag keeps this file out of
// every normal build.
package tools

import (
	_ "github.com/axllent/mailpit"
	_ "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen"
	_ "github.com/oapi-codegen/runtime"
	_ "github.com/stripe/stripe-mock"
)
