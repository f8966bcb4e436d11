// gguftpl's worker for @huggingface/jinja, the JavaScript Jinja engine LM Studio's template errors come from.
//
// It speaks gguftpl's worker frames (gguftpl/worker.py): a 4-byte big-endian length, then UTF-8 JSON, on stdin
// and stdout. It writes {"ready": true} once the engine is imported, then for each request {"op", "items"} one
// answer frame per item: {"kind": "ok", "value": ...} or {"kind": "error" | "memory", "type", "message"}.
//
// Ops: "load" (item: template text -> {"error": null | {kind, message, line}}), "render" (item: {template,
// requests: [RenderRequest.to_dict()...]} -> [Rendered.to_dict()...]), "version".
//
// Renders run in a worker_threads Worker with its own heap limit, so the main thread stays free to notice that
// its parent died (a render stuck in a loop would otherwise run on for hours) and to answer "memory" when the
// render thread runs out of heap. Time is bounded by the parent, which kills this process.
//
// argv: <engine dir (holds node_modules)> <max output characters> <render heap MiB>

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";

// Nothing but frames may reach stdout: whatever a library prints goes to stderr (which the parent discards).
for (const name of ["log", "info", "debug", "warn", "trace", "dir", "table"]) {
	console[name] = (...args) => console.error(...args);
}

if (isMainThread) {
	main();
} else {
	renderThread(workerData);
}

// ------------------------------------------------------------------------------------------- main thread

function main() {
	const [engineDir, maxOutputArg, heapArg] = process.argv.slice(2);
	const parent = process.ppid;
	let library;
	try {
		library = findLibrary(engineDir);
	} catch (err) {
		writeFrame({ ready: false, error: `@huggingface/jinja is not installed in ${engineDir}: ${err.message}` });
		process.exit(1);
	}
	// the parent may die without closing our stdin (SIGKILL of a process group leaves pipes to init's children)
	setInterval(() => {
		if (process.ppid !== parent) process.exit(1);
	}, 250).unref();

	const heapMb = Number(heapArg) || 1024;
	const thread = new Worker(new URL(import.meta.url), {
		workerData: { entry: library.entry, version: library.version, maxOutput: Number(maxOutputArg) || 1 << 20 },
		resourceLimits: { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
		stdout: true, // a render thread's prints are dropped, never mixed into the frames
		stderr: true,
	});
	thread.stdout.resume();
	thread.stderr.resume();
	let ready = false;
	let pending = 0; // answers still owed for the request in flight
	const queue = [];

	const next = () => {
		if (pending > 0 || queue.length === 0 || !ready) return;
		const req = queue.shift();
		const items = Array.isArray(req?.items) ? req.items : [];
		if (items.length === 0) return next();
		pending = items.length;
		thread.postMessage({ op: req.op, items });
	};

	thread.on("message", (msg) => {
		if (msg.ready !== undefined) {
			if (!msg.ready) {
				writeFrame({ ready: false, error: msg.error });
				process.exit(1);
			}
			ready = true;
			writeFrame({ ready: true });
			return next();
		}
		writeFrame(msg.answer);
		pending -= 1;
		next();
	});
	const died = (why) => {
		// the render thread ran out of heap (ERR_WORKER_OUT_OF_MEMORY) or died: the item in flight is the cause
		if (!ready) writeFrame({ ready: false, error: why });
		else writeFrame({ kind: "memory", type: "Error", message: why, exit: true });
		process.exit(0);
	};
	thread.on("error", (err) => died(errorText(err)));
	thread.on("exit", (code) => died(`the render thread exited (${code})`));

	readFrames(process.stdin, (req) => {
		queue.push(req);
		next();
	});
}

function findLibrary(engineDir) {
	const root = join(engineDir, "node_modules", "@huggingface", "jinja");
	const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
	const exported = pkg.exports?.["."]?.import ?? pkg.module ?? "dist/index.js";
	return { entry: pathToFileURL(join(root, exported)).href, version: String(pkg.version) };
}

function readFrames(stream, onFrame) {
	let buf = Buffer.alloc(0);
	stream.on("data", (chunk) => {
		buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
		while (buf.length >= 4) {
			const n = buf.readUInt32BE(0);
			if (buf.length < 4 + n) break;
			const body = buf.subarray(4, 4 + n);
			buf = buf.subarray(4 + n);
			let req;
			try {
				req = JSON.parse(body.toString("utf8"));
			} catch {
				req = { op: "garbage", items: [null] };
			}
			onFrame(req);
		}
	});
	stream.on("end", () => process.exit(0)); // the parent finished (or died and the pipe closed)
}

function writeFrame(obj) {
	const body = Buffer.from(JSON.stringify(obj), "utf8");
	const head = Buffer.alloc(4);
	head.writeUInt32BE(body.length, 0);
	process.stdout.write(Buffer.concat([head, body])); // synchronous for pipes on Linux
}

function errorText(err) {
	return err && typeof err === "object" && "message" in err ? String(err.message) : String(err);
}

// ------------------------------------------------------------------------------------------ render thread

async function renderThread({ entry, version, maxOutput }) {
	let Template;
	try {
		({ Template } = await import(entry));
	} catch (err) {
		parentPort.postMessage({ ready: false, error: `cannot import @huggingface/jinja: ${errorText(err)}` });
		return;
	}
	const parsed = new Map(); // template text -> Template or its parse error, as transformers.js caches them
	const ops = {
		load: (text) => {
			const t = parse(Template, parsed, text);
			return { error: t instanceof Template ? null : t };
		},
		render: (item) => {
			const t = parse(Template, parsed, item.template);
			return item.requests.map((req) => (t instanceof Template ? render(t, req, maxOutput) : { text: null, error: t }));
		},
		version: () => ({ library: "@huggingface/jinja", version, node: process.version }),
	};
	parentPort.on("message", ({ op, items }) => {
		for (const item of items) {
			const fn = ops[op];
			let answer;
			if (fn === undefined) {
				answer = { kind: "error", type: "ValueError", message: `unknown op ${JSON.stringify(op)}` };
			} else {
				try {
					answer = { kind: "ok", value: fn(item) };
				} catch (err) {
					// a malformed item (the engine's own errors are answers, caught in parse and render)
					answer = { kind: "error", type: err?.name ?? "Error", message: errorText(err).slice(0, 2000) };
				}
			}
			parentPort.postMessage({ answer });
		}
	});
	parentPort.postMessage({ ready: true });
}

const MAX_PARSED = 32;

function parse(Template, parsed, text) {
	if (typeof text !== "string") throw new TypeError("the template is not a string");
	let t = parsed.get(text);
	if (t === undefined) {
		try {
			t = new Template(text);
		} catch (err) {
			t = engineError(err, "syntax");
		}
		if (parsed.size >= MAX_PARSED) parsed.delete(parsed.keys().next().value);
		parsed.set(text, t);
	}
	return t;
}

function render(template, req, maxOutput) {
	// transformers.js PreTrainedTokenizer.apply_chat_template: render({messages, add_generation_prompt, tools,
	// documents, ...special_tokens_map, ...kwargs}); raise_exception, range, namespace and strftime_now are the
	// engine's own globals (passing one again raises "Variable already declared", as there)
	const context = {
		messages: req.messages,
		add_generation_prompt: Boolean(req.add_generation_prompt),
		tools: req.tools ?? null,
		documents: null,
		...(req.variables ?? {}),
	};
	let text;
	try {
		text = template.render(context);
	} catch (err) {
		return { text: null, error: engineError(err, "render") };
	}
	if (typeof text !== "string") text = String(text);
	if (text.length > maxOutput) {
		return { text: null, error: { kind: "overrun", message: `rendered output exceeded ${maxOutput} characters`, line: null } };
	}
	if (/\p{Surrogate}/u.test(text)) {
		// JSON would carry it, but it is no UTF-8: what the runtime tokenizes is not this text
		return { text: null, error: { kind: "render", message: "the prompt holds a lone surrogate (not UTF-8)", line: null } };
	}
	return { text, error: null };
}

const BOUNDS = [/Maximum call stack size exceeded/, /Invalid string length/, /Invalid array length/, /allocation failed/];

function engineError(err, kind) {
	const message = errorText(err).slice(0, 2000);
	// a bound of the JavaScript VM, not the template's own error: recursion, string or array past V8's limits
	const overran = err instanceof RangeError && BOUNDS.some((re) => re.test(message));
	return { kind: overran ? "overrun" : kind, message, line: null };
}
