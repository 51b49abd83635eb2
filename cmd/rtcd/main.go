// Command rtcd is the rtcd control plane. Subcommands:
//
//	rtcd init  --data-dir DIR   create a workspace, a project and an API key; print them as JSON
//	rtcd serve [flags]          serve the API (see docs/configuration.md)
//	rtcd version
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goccy/go-json"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/cluster"
	"rtcd/config"
	"rtcd/datadir"
	"rtcd/media"
	"rtcd/metrics"
	"rtcd/server"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "init":
		err = runInit(os.Args[2:])
	case "serve":
		err = runServe(os.Args[2:])
	case "billing":
		err = runBilling(os.Args[2:])
	case "media":
		err = runMedia(os.Args[2:])
	case "media-key":
		err = runMediaKey(os.Args[2:])
	case "webhooks":
		err = runWebhooks(os.Args[2:])
	case "backup":
		err = runBackup(os.Args[2:])
	case "restore":
		err = runRestore(os.Args[2:])
	case "version":
		fmt.Println(server.Version)
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "rtcd: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rtcd:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  rtcd init  --data-dir DIR [--owner-email ADDR]
                              create a workspace owned by ADDR (default owner@localhost),
                              one project and an API key holding every scope
  rtcd serve [flags]          serve the API; rtcd serve -h lists every flag and its RTCD_ variable
  rtcd media [--listen ADDR] [--control-url URL] [--media-key HEX | --data-dir DIR] [--metrics-listen ADDR]
             [--cluster-name NAME --cluster-etcd HOST:PORT[,...] [--media-url URL] [--control-advertise URL]]
                              run the reference media node on its own, reporting to a control plane;
                              with --cluster-name, registered with a cluster's nodes, which choose it for rooms
  rtcd media-key --data-dir DIR
                              print the media key a separately run node needs (hex; keep it secret)
  rtcd billing adjust --account ID --amount -5.00 --reason TEXT [--data-dir DIR] [--metrics-listen ADDR]
                              credit (positive) or debit (negative) a workspace's wallet on a running server
  rtcd backup --to DIR [--data-dir DIR] [--metrics-listen ADDR]
                              write an online, consistent backup of a running server into DIR
  rtcd restore --from BACKUP_DIR --data-dir NEW_DIR
                              copy a backup into a new data directory, for rtcd serve
  rtcd webhooks test --url URL --type TYPE [--secret whsec_… | RTCD_WEBHOOK_SECRET]
                              send one signed event of TYPE to a receiver, as rtcd delivers it
                              (local development; http:// and loopback allowed)
  rtcd version`)
}

func setupLogging(level string) {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})))
}

// runInit bootstraps a data directory and prints the credentials once.
func runInit(args []string) error {
	cfg, err := config.FromEnv("rtcd init", args)
	if err != nil {
		return err
	}
	setupLogging(cfg.LogLevel)
	lock, err := datadir.Acquire(cfg.DataDir)
	if err != nil {
		return err
	}
	defer lock.Release()
	res, err := server.Initialize(cfg, clock.Real{})
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func runServe(args []string) error {
	cfg, err := config.FromEnv("rtcd serve", args)
	if err != nil {
		return err
	}
	setupLogging(cfg.LogLevel)
	// The handler goes in before Start: Start already serves and logs
	// "rtcd serving", and a signal arriving between that line and a later
	// Notify would kill the process unclean, skipping the drain.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	srv, err := server.Start(cfg, server.Options{})
	if err != nil {
		return err
	}
	select {
	case s := <-sig:
		slog.Info("shutting down: draining in-flight requests", "signal", s.String())
	case err := <-srv.Errors():
		slog.Error("listener stopped", "error", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.ShutdownTimeoutSeconds)*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	slog.Info("stopped cleanly")
	return nil
}

// runBilling runs operator billing commands against a running server,
// through its private listener and the data directory's admin token.
func runBilling(args []string) error {
	if len(args) == 0 || args[0] != "adjust" {
		return fmt.Errorf("usage: rtcd billing adjust --account ID --amount DECIMAL --reason TEXT")
	}
	fs := flag.NewFlagSet("rtcd billing adjust", flag.ContinueOnError)
	dataDir := fs.String("data-dir", envOr("RTCD_DATA_DIR", "./data"), "data directory of the running server (for its admin token)")
	private := fs.String("metrics-listen", envOr("RTCD_METRICS_LISTEN", "127.0.0.1:9100"), "the server's private listener")
	account := fs.String("account", "", "workspace (account) id, acct_…")
	amount := fs.String("amount", "", "signed decimal: positive credits, negative debits")
	reason := fs.String("reason", "", "why (recorded in the ledger and the audit log)")
	operator := fs.String("operator", envOr("USER", "operator"), "who runs the command (audit log)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *account == "" || *amount == "" || *reason == "" {
		return fmt.Errorf("--account, --amount and --reason are required")
	}
	token, err := os.ReadFile(filepath.Join(*dataDir, "admin.token"))
	if err != nil {
		return fmt.Errorf("reading the admin token: %w", err)
	}
	out, err := server.AdjustBalance(*private, strings.TrimSpace(string(token)), server.AdjustRequest{
		AccountID: *account, Amount: *amount, Reason: *reason, Operator: *operator,
	})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// mediaKeyFrom returns the media key from hex, or derives it from the
// master key of dataDir (a node on the control plane's machine).
func mediaKeyFrom(hexKey, dataDir string) ([32]byte, error) {
	var key [32]byte
	if hexKey != "" {
		raw, err := hex.DecodeString(hexKey)
		if err != nil || len(raw) != len(key) {
			return key, fmt.Errorf("--media-key must be %d bytes of hex (rtcd media-key prints it)", len(key))
		}
		copy(key[:], raw)
		return key, nil
	}
	raw, err := os.ReadFile(filepath.Join(dataDir, "master.key"))
	if err != nil {
		return key, fmt.Errorf("no --media-key and no master key in %s: %w", dataDir, err)
	}
	master, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return key, fmt.Errorf("%s/master.key is not hex", dataDir)
	}
	keys, err := auth.DeriveKeys(master)
	if err != nil {
		return key, err
	}
	return keys.MediaToken(), nil
}

func runMediaKey(args []string) error {
	fs := flag.NewFlagSet("rtcd media-key", flag.ContinueOnError)
	dataDir := fs.String("data-dir", envOr("RTCD_DATA_DIR", "./data"), "data directory of the control plane")
	if err := fs.Parse(args); err != nil {
		return err
	}
	key, err := mediaKeyFrom("", *dataDir)
	if err != nil {
		return err
	}
	fmt.Println(hex.EncodeToString(key[:]))
	return nil
}

// runMedia runs the reference media node on its own: it verifies media
// tokens with the media key, reports joins, leaves and presence to the
// control plane's private listener, and takes room-close and remove
// commands on /internal/ (signed with a key derived from the media key).
// With --metrics-listen it serves its own metrics there: the media
// families, build info and the Go runtime's, nothing of the control
// plane's.
func runMedia(args []string) error {
	fs := flag.NewFlagSet("rtcd media", flag.ContinueOnError)
	listen := fs.String("listen", envOr("RTCD_MEDIA_LISTEN", "127.0.0.1:8081"), "HOST:PORT of the node (WebSocket at /rtc, commands at /internal/)")
	controlURL := fs.String("control-url", envOr("RTCD_MEDIA_CONTROL_PLANE", "http://127.0.0.1:9100"), "the control plane's private listener, where reports go")
	hexKey := fs.String("media-key", os.Getenv("RTCD_MEDIA_KEY"), "media key (hex) from rtcd media-key; empty: derive from --data-dir")
	dataDir := fs.String("data-dir", envOr("RTCD_DATA_DIR", "./data"), "control plane data directory to derive the key from (same machine)")
	hostname, _ := os.Hostname()
	nodeID := fs.String("node-id", envOr("RTCD_MEDIA_NODE_ID", hostname), "name of this node in reports")
	awaitAdmission := fs.Bool("await-admission", envOr("RTCD_MEDIA_AWAIT_ADMISSION", "true") == "true",
		"serve a join only once the control plane has recorded it (it answers through the control plane's --media-control-url); false admits at once")
	logLevel := fs.String("log-level", envOr("RTCD_LOG_LEVEL", "info"), "debug, info, warn or error")
	metricsListen := fs.String("metrics-listen", os.Getenv("RTCD_MEDIA_METRICS_LISTEN"), "HOST:PORT of the node's /metrics and /healthz (keep it private); empty: none")
	nodeIP := fs.String("media-node-ip", os.Getenv("RTCD_MEDIA_NODE_IP"), "IP address clients send media to (ICE host candidates); empty: the --listen host")
	var envErr error
	udpPort := fs.Int("media-udp-port", envInt("RTCD_MEDIA_UDP_PORT", 0, &envErr), "the one UDP port every WebRTC peer uses; 0: the --listen port number (on UDP)")
	tcpPort := fs.Int("media-tcp-port", envInt("RTCD_MEDIA_TCP_PORT", 0, &envErr), "ICE over TCP port; 0: the --listen port + 1; -1: off")
	turnPort := fs.Int("media-turn-port", envInt("RTCD_MEDIA_TURN_PORT", 0, &envErr), "embedded TURN server port (UDP and TCP), for clients that reach neither the UDP port nor ICE over TCP; 0: off")
	clusterName := fs.String("cluster-name", os.Getenv("RTCD_CLUSTER_NAME"), "register with this cluster of rtcd nodes (their --cluster-name), which then choose this node for rooms; empty: serve the one control plane of --control-url")
	clusterEtcd := fs.String("cluster-etcd", os.Getenv("RTCD_CLUSTER_ETCD"), "the cluster's etcd endpoints (comma-separated HOST:PORT), with --cluster-name")
	mediaURL := fs.String("media-url", os.Getenv("RTCD_MEDIA_URL"), "with --cluster-name: the endpoint clients reach this node at (wss://, ws:// on loopback); empty: ws://<--listen>/rtc")
	controlAdvertise := fs.String("control-advertise", os.Getenv("RTCD_MEDIA_CONTROL_ADVERTISE"), "with --cluster-name: the http(s) origin the control plane sends this node's commands to; empty: http://<--listen>")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*clusterName == "") != (*clusterEtcd == "") {
		return errors.New("rtcd media: --cluster-name and --cluster-etcd go together")
	}
	if envErr != nil {
		return envErr
	}
	setupLogging(*logLevel)
	netOpts := media.NetworkOptions{NodeIP: *nodeIP, UDPPort: *udpPort, TCPPort: *tcpPort, TURNPort: *turnPort}
	if err := netOpts.Validate(); err != nil {
		return err
	}
	key, err := mediaKeyFrom(*hexKey, *dataDir)
	if err != nil {
		return err
	}
	counts := metrics.NewNode(server.Version)
	signing := server.MediaReportKey(key)
	reporter, err := media.NewHTTPReporter(media.HTTPConfig{BaseURL: strings.TrimRight(*controlURL, "/"), Key: signing, Metrics: counts.Media})
	if err != nil {
		return err
	}
	metricsLn, err := listenNodeMetrics(*metricsListen)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		if metricsLn != nil {
			_ = metricsLn.Close()
		}
		return err
	}
	closeListeners := func() {
		_ = ln.Close()
		if metricsLn != nil {
			_ = metricsLn.Close()
		}
	}
	// What a cluster's nodes are told of this node (registered once it
	// serves): checked before anything else starts.
	member := cluster.MediaMember{ID: *nodeID, MediaURL: *mediaURL, ControlURL: strings.TrimRight(*controlAdvertise, "/")}
	if member.MediaURL == "" {
		member.MediaURL = "ws://" + ln.Addr().String() + media.RTCPath
	}
	if member.ControlURL == "" {
		member.ControlURL = "http://" + ln.Addr().String()
	}
	if *clusterName != "" {
		if err := config.CheckMediaURL(member.MediaURL); err != nil {
			closeListeners()
			return fmt.Errorf("--media-url: %w", err)
		}
		if u, err := url.Parse(member.ControlURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") ||
			u.Hostname() == "" || net.ParseIP(u.Hostname()).IsUnspecified() {
			closeListeners()
			return fmt.Errorf("--control-advertise=%q: want the http(s) origin the cluster's nodes reach this node at (set it when --listen is on every interface)", member.ControlURL)
		}
	}
	_, listenPort, _ := net.SplitHostPort(*listen)
	webrtc, err := media.OpenWebRTC(netOpts, ln.Addr(), listenPort == "0")
	if err != nil {
		closeListeners()
		return err
	}
	node, err := media.NewNode(media.NodeConfig{NodeID: *nodeID, Verifier: auth.NewMediaVerifier(key), Reporter: reporter, WebRTC: webrtc,
		Metrics: counts.Media, AwaitAdmission: *awaitAdmission})
	if err != nil {
		closeListeners()
		media.CloseWebRTC(webrtc)
		return err
	}
	signalled, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancelServe := context.WithCancel(signalled)
	defer cancelServe()
	tcpAddr, metricsAddr := "off", "none"
	if webrtc.TCP != nil {
		tcpAddr = webrtc.TCP.Addr().String()
	}
	var metricsSrv *nodeMetricsServer
	if metricsLn != nil {
		metricsAddr = metricsLn.Addr().String()
		metricsSrv = serveNodeMetrics(metricsLn, counts, cancelServe)
	}
	if *clusterName != "" {
		reg, err := cluster.RegisterMedia(*clusterName, strings.Split(*clusterEtcd, ","), member)
		if err != nil {
			return err
		}
		// Out of the cluster first, so no room chooses it while it drains
		// (and surely before the process exits).
		go func() {
			<-ctx.Done()
			reg.Close()
		}()
		defer reg.Close()
		slog.Info("rtcd media node registered with the cluster", "cluster", *clusterName, "media_url", member.MediaURL, "control_url", member.ControlURL)
	}
	slog.Info("rtcd media node serving", "listen", ln.Addr().String(), "control_plane", *controlURL, "node_id", *nodeID,
		"webrtc_udp", webrtc.UDP.LocalAddr().String(), "ice_tcp", tcpAddr, "metrics", metricsAddr)
	err = node.Serve(ctx, ln, media.NewControlHandler(node, signing, clock.Real{}))
	flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = reporter.Close(flushCtx) // deliver the last leaves
	// The metrics listener stops last, so a scrape during the drain sees the
	// leaves counted.
	if metricsSrv != nil {
		if merr := metricsSrv.stop(); err == nil {
			err = merr
		}
	}
	return err
}

// envInt returns the integer in environment variable name, or def when it
// is unset; a value that is not an integer is recorded in *bad, so the
// caller refuses to start rather than silently use the default.
func envInt(name string, def int, bad *error) int {
	raw := os.Getenv(name)
	if raw == "" {
		return def
	}
	v, err := strconv.Atoi(raw)
	if err != nil {
		*bad = fmt.Errorf("%s=%q: want an integer", name, raw)
		return def
	}
	return v
}
