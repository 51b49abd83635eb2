package media

import (
	"math"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// Connection quality levels (spec: client SDK events, quality levels),
// generic whatever the media engine.
const (
	QualityUnknown   = "unknown"
	QualityExcellent = "excellent"
	QualityGood      = "good"
	QualityPoor      = "poor"
	QualityLost      = "lost"
)

// Connection quality thresholds (docs/media-protocol.md, Connection
// quality). Loss is the worse of the two directions, as a fraction; round
// trip and jitter in milliseconds.
const (
	qualityIntervalMillis        = 1000
	qualityExcellentLossFraction = 0.02
	qualityExcellentRTTMillis    = 150
	qualityExcellentJitterMillis = 30
	qualityGoodLossFraction      = 0.08
	qualityGoodRTTMillis         = 300
	qualityGoodJitterMillis      = 60
	// qualityConfirmIntervals is how many evaluations in a row a new level
	// must hold before the client is told (lost is told at once), so one
	// unlucky second does not flap the indicator.
	qualityConfirmIntervals = 2
	// qualityMinPackets is the least packets an interval needs (both
	// directions together) for its loss to count as a measurement.
	qualityMinPackets = 10
)

// linkSample is one interval's measurement of a participant's connection.
type linkSample struct {
	measured     bool    // enough packets moved to say anything
	lossFraction float64 // the worse direction
	rttMillis    float64
	jitterMillis float64
	iceDown      bool // either connection's ICE is disconnected or failed
}

// qualityLevel maps a sample to a level.
func qualityLevel(s linkSample) string {
	switch {
	case s.iceDown:
		return QualityLost
	case !s.measured:
		return QualityUnknown
	case s.lossFraction < qualityExcellentLossFraction && s.rttMillis < qualityExcellentRTTMillis && s.jitterMillis < qualityExcellentJitterMillis:
		return QualityExcellent
	case s.lossFraction < qualityGoodLossFraction && s.rttMillis < qualityGoodRTTMillis && s.jitterMillis < qualityGoodJitterMillis:
		return QualityGood
	default:
		return QualityPoor
	}
}

// qualityState turns samples into level changes worth telling the client.
// Owned by the peer's goroutine.
type qualityState struct {
	told      string // the level the client was last told; "" is unknown
	candidate string
	streak    int

	// Counters at the last sample, to take differences.
	upReceived, upLost uint64
	downSent           uint64
}

// observe records one level and returns the level to tell the client, or
// "" when nothing changes.
func (q *qualityState) observe(level string) string {
	if q.told == "" {
		q.told = QualityUnknown // where every client starts
	}
	if level == q.told {
		q.candidate, q.streak = "", 0
		return ""
	}
	if level == q.candidate {
		q.streak++
	} else {
		q.candidate, q.streak = level, 1
	}
	if q.streak >= qualityConfirmIntervals || level == QualityLost {
		q.told, q.candidate, q.streak = level, "", 0
		return level
	}
	return ""
}

// sampleLink measures the peer's two connections since the last sample:
// uplink loss and jitter from the publish connection's inbound streams,
// downlink loss from what the client reports (receiver reports' fraction
// lost, and distinct NACKed packets over packets sent, whichever is worse:
// NACKs see loss that retransmission later hides from reports), round trip and
// jitter from receiver reports. Runs on the peer's goroutine.
func (p *peer) sampleLink() linkSample {
	var s linkSample
	q := &p.quality
	var upReceived, upLost uint64
	if p.pub != nil {
		for _, st := range p.pub.GetStats() {
			if in, ok := st.(webrtc.InboundRTPStreamStats); ok {
				upReceived += uint64(in.PacketsReceived)
				if in.PacketsLost > 0 {
					upLost += uint64(in.PacketsLost)
				}
				s.jitterMillis = math.Max(s.jitterMillis, in.Jitter*1000)
			}
		}
		s.iceDown = s.iceDown || iceDown(p.pub.ICEConnectionState())
	}
	dReceived, dLost := upReceived-min(upReceived, q.upReceived), upLost-min(upLost, q.upLost)
	q.upReceived, q.upLost = upReceived, upLost
	packets := dReceived + dLost
	if dReceived+dLost > 0 {
		s.lossFraction = float64(dLost) / float64(dReceived+dLost)
	}

	if p.sub != nil {
		for _, st := range p.sub.GetStats() {
			if ri, ok := st.(webrtc.RemoteInboundRTPStreamStats); ok {
				s.lossFraction = math.Max(s.lossFraction, ri.FractionLost)
				s.rttMillis = math.Max(s.rttMillis, ri.RoundTripTime*1000)
				s.jitterMillis = math.Max(s.jitterMillis, ri.Jitter*1000)
			}
		}
		s.iceDown = s.iceDown || iceDown(p.sub.ICEConnectionState())
	}
	var sent, dNack uint64
	p.r.mu.Lock()
	for _, d := range p.downs {
		sent += d.sent.Load()
		dNack += uint64(d.takeNacked())
	}
	p.r.mu.Unlock()
	dSent := sent - min(sent, q.downSent)
	q.downSent = sent
	packets += dSent
	if dSent > 0 {
		s.lossFraction = math.Max(s.lossFraction, math.Min(1, float64(dNack)/float64(dSent)))
	}
	s.measured = packets >= qualityMinPackets
	return s
}

func iceDown(s webrtc.ICEConnectionState) bool {
	return s == webrtc.ICEConnectionStateDisconnected || s == webrtc.ICEConnectionStateFailed
}

// evaluateQuality samples the link and tells the client when its level
// changed (connection.quality).
func (p *peer) evaluateQuality() {
	s := p.sampleLink()
	if level := p.quality.observe(qualityLevel(s)); level != "" {
		p.send(encode(qualityMessage{Type: typeQualityChanged, Quality: level,
			LossPercent: math.Round(s.lossFraction*1000) / 10, RTTMillis: math.Round(s.rttMillis), JitterMillis: math.Round(s.jitterMillis)}))
	}
}

type qualityMessage struct {
	Type         string  `json:"type"`
	Quality      string  `json:"quality"`
	LossPercent  float64 `json:"loss_percent"`
	RTTMillis    float64 `json:"rtt_ms"`
	JitterMillis float64 `json:"jitter_ms"`
}

// Active speaker (docs/media-protocol.md, Active speaker).
const (
	speakerIntervalMillis = 500
	// speakerMaxLevel is the quietest audio level (RFC 6464: dBov below
	// full scale, 0 loudest, 127 silence) that counts as speech.
	speakerMaxLevel = 70
	// speakerConfirmIntervals is how many intervals in a row a new loudest
	// participant (or silence) must last before the room is told.
	speakerConfirmIntervals = 2
)

// noteAudioLevel reads the audio level extension of an audio packet into
// the track's accumulators, before the forwarder strips extensions.
func (u *upTrack) noteAudioLevel(l *upLayer, pkt *rtp.Packet) {
	if l.audioLevelExtID == 0 {
		return
	}
	raw := pkt.GetExtension(l.audioLevelExtID)
	if raw == nil {
		return
	}
	var a rtp.AudioLevelExtension
	if a.Unmarshal(raw) != nil || a.Level > speakerMaxLevel {
		return
	}
	// Loudness in linear terms, so a loud burst outweighs a murmur.
	u.loudnessSum.Add(uint64(math.Pow(10, float64(127-a.Level)/20)))
	u.loudPackets.Add(1)
}

// speakerLoop picks each room's active speaker every speakerIntervalMillis
// and tells the hub when it changes.
func (r *rtc) speakerLoop() {
	defer close(r.speakerDone)
	tick := time.NewTicker(speakerIntervalMillis * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.stopSpeaker:
			return
		case <-tick.C:
			for roomID, speaker := range r.evaluateSpeakers() {
				r.node.post(func(h *hub) { h.activeSpeaker(roomID, speaker) })
			}
		}
	}
}

// evaluateSpeakers returns the rooms whose active speaker changed, with
// the new one ("" for none).
func (r *rtc) evaluateSpeakers() map[string]string {
	changed := map[string]string{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, sr := range r.rooms {
		loudest, best := "", 0.0
		for _, up := range sr.tracks {
			if up.kind != webrtc.RTPCodecTypeAudio {
				continue
			}
			sum, n := up.loudnessSum.Swap(0), up.loudPackets.Swap(0)
			if n == 0 {
				continue
			}
			if avg := float64(sum) / float64(n); avg > best {
				loudest, best = up.publisher.id.ParticipantID, avg
			}
		}
		if loudest == sr.speaker {
			sr.speakerCandidate, sr.speakerStreak = "", 0
			continue
		}
		if loudest == sr.speakerCandidate {
			sr.speakerStreak++
		} else {
			sr.speakerCandidate, sr.speakerStreak = loudest, 1
		}
		if sr.speakerStreak >= speakerConfirmIntervals {
			sr.speaker, sr.speakerCandidate, sr.speakerStreak = loudest, "", 0
			changed[id] = loudest
		}
	}
	return changed
}
