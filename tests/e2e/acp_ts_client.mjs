// Drives a real `zeroclaw gateway` with the official TypeScript ACP SDK's client, over its
// Streamable HTTP client (`createHttpStream`) or its WebSocket client
// (`createWebSocketStream` with the `ws` package). tests/acp_ts_sdk.py installs both
// outside the repository and runs this with one JSON argument:
//   {"sdk": <package dir>, "transport": "http" | "ws", "url", "token", "cwd"}
// Scenario: initialize, session/new, a prompt whose shell call asks for permission
// (allowed once), a slow prompt cancelled after its first chunk, then a second connection
// that loads the session and sees its history replayed. Prints one JSON object.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const options = JSON.parse(process.argv[2]);
const load = (relative) => import(pathToFileURL(`${options.sdk}/${relative}`).href);
const sdk = await load("dist/v1/stable/acp.js");
const headers = options.token ? { Authorization: `Bearer ${options.token}` } : {};

async function openStream() {
  if (options.transport === "http") {
    const { createHttpStream } = await load("dist/transports/http-stream.js");
    return createHttpStream(options.url, { headers });
  }
  const { createWebSocketStream } = await load("dist/transports/ws-stream.js");
  const WebSocket = createRequire(`${options.sdk}/package.json`)("ws");
  return createWebSocketStream(options.url, { headers, WebSocket });
}

function recordingClient() {
  const seen = { updates: [], permissions: [], waiters: [] };
  const app = sdk
    .client({ name: "zeroclaw-ts-sdk-test" })
    .onRequest(sdk.methods.client.session.requestPermission, ({ params }) => {
      seen.permissions.push(params.toolCall.title ?? "");
      const allow = params.options.find((option) => option.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onNotification(sdk.methods.client.session.update, ({ params }) => {
      seen.updates.push(params.update);
      seen.waiters = seen.waiters.filter((waiter) => !waiter(params.update));
    });
  return { app, seen };
}

function nextUpdate(seen, predicate) {
  return new Promise((resolve) => {
    seen.waiters.push((update) => (predicate(update) ? (resolve(update), true) : false));
  });
}

function chunkText(updates) {
  return updates
    .filter((update) => update.sessionUpdate === "agent_message_chunk")
    .map((update) => update.content.text)
    .join("");
}

const initParams = {
  protocolVersion: 1,
  clientCapabilities: {},
  clientInfo: { name: "zeroclaw-ts-sdk-test", version: "1" },
};
const firstPrompt = 'Streaming through the SDK\n/tool shell {"command": "ls"}';

const first = recordingClient();
const live = await first.app.connectWith(await openStream(), async (ctx) => {
  const init = await ctx.request(sdk.methods.agent.initialize, initParams);
  const session = await ctx.request(sdk.methods.agent.session.new, {
    cwd: options.cwd,
    mcpServers: [],
  });
  const sessionId = session.sessionId;
  const answered = await ctx.request(sdk.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: firstPrompt }],
  });
  const streamedBefore = first.seen.updates.length;
  const slow = ctx.request(sdk.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "slow ".repeat(300) }],
  });
  await nextUpdate(first.seen, (update) => update.sessionUpdate === "agent_message_chunk");
  await ctx.notify(sdk.methods.agent.session.cancel, { sessionId });
  const cancelled = await slow;
  return {
    protocolVersion: init.protocolVersion,
    loadSession: init.agentCapabilities?.loadSession ?? false,
    sessionId,
    stopReason: answered.stopReason,
    permissions: first.seen.permissions,
    firstText: chunkText(first.seen.updates.slice(0, streamedBefore)),
    toolStatuses: first.seen.updates
      .filter((update) => update.sessionUpdate === "tool_call_update")
      .map((update) => update.status ?? ""),
    cancelledStopReason: cancelled.stopReason,
  };
});

const second = recordingClient();
const replayed = await second.app.connectWith(await openStream(), async (ctx) => {
  await ctx.request(sdk.methods.agent.initialize, initParams);
  // Only completed turns are stored: the history ends with the first turn's last words.
  const lastReplayed = nextUpdate(second.seen, () =>
    chunkText(second.seen.updates).endsWith(live.firstText),
  );
  await ctx.request(sdk.methods.agent.session.load, {
    sessionId: live.sessionId,
    cwd: options.cwd,
    mcpServers: [],
  });
  // The load's answer comes on the connection's stream and the history on the session's:
  // the two may be read in either order.
  await Promise.race([
    lastReplayed,
    new Promise((_, reject) => setTimeout(() => reject(new Error("no replay")), 10000)),
  ]);
  return {
    replayedUserTexts: second.seen.updates
      .filter((update) => update.sessionUpdate === "user_message_chunk")
      .map((update) => update.content.text),
    replayedText: chunkText(second.seen.updates),
  };
});

process.stdout.write(JSON.stringify({ ...live, ...replayed }));
