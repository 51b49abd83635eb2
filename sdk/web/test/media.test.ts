import assert from "node:assert/strict";
import { test } from "node:test";

import { msidsByMid } from "../src/media.js";

test("msidsByMid reads each m-section's mid and msid (the node's subscribe offer names publisher and track)", () => {
  const sdp = [
    "v=0",
    "o=- 1 2 IN IP4 127.0.0.1",
    "s=-",
    "t=0 0",
    "a=group:BUNDLE 0 1 2",
    "m=audio 9 UDP/TLS/RTP/SAVPF 111",
    "a=mid:0",
    "a=msid:part_ann tr_mic",
    "a=recvonly",
    "m=video 9 UDP/TLS/RTP/SAVPF 96",
    "a=mid:1",
    "a=msid:part_ann tr_cam",
    "m=video 0 UDP/TLS/RTP/SAVPF 96",
    "a=mid:2",
    "a=inactive",
    "",
  ].join("\r\n");
  const m = msidsByMid(sdp);
  assert.deepEqual([...m.entries()], [
    ["0", { stream: "part_ann", track: "tr_mic" }],
    ["1", { stream: "part_ann", track: "tr_cam" }],
  ]);
  assert.equal(msidsByMid("v=0\nm=audio 9 RTP/AVP 0\na=mid:a\na=msid:s t\n").get("a")?.track, "t", "bare newlines too");
  assert.equal(msidsByMid("").size, 0);
});
