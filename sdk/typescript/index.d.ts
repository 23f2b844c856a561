// Types of the brig SDK (index.js). Hand-written: the package is plain
// JavaScript with no build step and no dependencies.

/// <reference types="node" />

export type Command = string | string[];

export interface ConnectOptions {
  /** unix socket of brig serve (default: BRIG_SOCKET, else the server's default socket) */
  socket?: string;
  /** http://127.0.0.1:PORT of `brig serve --listen` (loopback only) */
  url?: string;
  /** the bearer token for url (default: BRIG_TOKEN) */
  token?: string;
  /** read the token from this file */
  tokenFile?: string;
  /** ms to wait for an answer that is not a stream (default 120000) */
  timeout?: number;
  /** the largest body buffered (default 80 MiB) */
  maxBody?: number;
}

export interface CreateOptions {
  /** a policy file's JSON (docs/policy.md) */
  policy?: Record<string, unknown>;
  /** a built-in profile, applied first */
  profile?: 'default' | 'strict' | 'build' | 'browser';
  /** a host directory (default: a new empty one removed with the sandbox) */
  workspace?: string;
  /** keep the workspace untouched; collect writes for diff/commit/reset (default true; false binds it read-write) */
  overlay?: boolean;
  name?: string;
  /** keep its audit stream (events()); default true */
  audit?: boolean;
}

export interface ExecOptions {
  /** ms; then SIGTERM, SIGKILL, exit 124 */
  timeout?: number;
  env?: Record<string, string>;
  cwd?: string;
  /** written to stdin at start, then end of file */
  input?: string | Uint8Array;
}

export interface StartOptions extends ExecOptions {
  /** keep stdin open for write() (default true) */
  stdin?: boolean;
  tty?: boolean;
  rows?: number;
  cols?: number;
}

export interface Usage {
  duration_ms?: number;
  cpu_user_ms?: number;
  cpu_system_ms?: number;
  memory_peak_bytes?: number | null;
  pids_peak?: number | null;
}

export type Reason = 'exited' | 'signaled' | 'timeout' | 'oom' | 'pids' | 'seccomp' | 'error';

/** How a command ended and what it wrote. A limit hit or a refused
 * connection is data here (summary, refusals), never an exception. */
export class Result {
  exitCode: number;
  reason: Reason | string;
  signal: number;
  summary: string;
  refusals: string[];
  warning: string;
  error: string | null;
  durationMs: number | null;
  report: Record<string, unknown> | null;
  stdoutBytes: Buffer;
  stderrBytes: Buffer;
  outputDropped: number;
  raw: Record<string, unknown>;
  readonly stdout: string;
  readonly stderr: string;
  readonly ok: boolean;
  readonly usage: Usage;
  /** throws CommandFailed unless it exited 0 */
  check(): this;
}

export interface Chunk {
  stream: 'stdout' | 'stderr';
  data: Buffer;
  readonly text: string;
}

export class OutputStream implements AsyncIterable<Chunk> {
  /** how it ended, once the iteration is over */
  readonly result: Result | null;
  readonly id: string | undefined;
  [Symbol.asyncIterator](): AsyncIterator<Chunk>;
  /** read to the end: the Result with stdout/stderr */
  collect(): Promise<Result>;
}

export class Process implements AsyncIterable<Chunk> {
  readonly sandbox: Sandbox;
  readonly id: string;
  info: Record<string, unknown>;
  stdin: { write(data: string | Uint8Array): Promise<number>; end(): Promise<void> };
  output(opts?: { follow?: boolean; offset?: number }): AsyncGenerator<Chunk>;
  [Symbol.asyncIterator](): AsyncIterator<Chunk>;
  write(data: string | Uint8Array, opts?: { eof?: boolean }): Promise<number>;
  closeStdin(): Promise<void>;
  signal(sig?: number | string): Promise<void>;
  kill(sig?: number | string): Promise<void>;
  resize(rows: number, cols: number): Promise<void>;
  /** null when timeout (ms) passed first */
  wait(opts?: { timeout?: number }): Promise<Result | null>;
  poll(): Promise<Result | null>;
  forget(): Promise<void>;
}

export interface FileInfo {
  name: string | null;
  name_hex?: string;
  type: 'file' | 'dir' | 'symlink' | 'fifo' | 'socket' | 'char' | 'block' | 'other';
  size: number;
  mode: number;
  uid: number;
  gid: number;
  mtime: number;
  target?: string;
  [k: string]: unknown;
}

export interface Download {
  dest: string;
  /** relative to dest; directories end in '/' */
  paths: string[];
  /** [path, why] */
  skipped: Array<[string, string]>;
}

export class Files {
  read(path: string): Promise<Buffer>;
  readText(path: string): Promise<string>;
  write(path: string, data: string | Uint8Array, opts?: { mode?: number }): Promise<number>;
  list(path: string): Promise<FileInfo[]>;
  stat(path: string): Promise<FileInfo>;
  exists(path: string): Promise<boolean>;
  mkdir(path: string, opts?: { mode?: number }): Promise<void>;
  remove(path: string): Promise<void>;
  makedirs(path: string, opts?: { mode?: number }): Promise<void>;
  upload(local: string, remoteDir: string): Promise<void>;
  downloadTar(remoteDir: string): Promise<Buffer>;
  /** nothing is written outside localDir: UnsafeArchive otherwise */
  download(remoteDir: string, localDir: string, opts?: { maxBytes?: number; maxEntries?: number }): Promise<Download>;
}

export interface NetworkRules {
  mode: 'none' | 'proxy' | 'filtered' | 'host';
  allow_hosts: string[];
  deny_hosts: string[];
  allow_private_hosts?: string[];
  allow_cidrs?: string[];
  live?: Array<{ action: 'allow' | 'deny'; host: string }>;
  [k: string]: unknown;
}

export class Network {
  get(): Promise<NetworkRules>;
  allow(host: string): Promise<NetworkRules>;
  deny(host: string): Promise<NetworkRules>;
  remove(host: string, action?: 'allow' | 'deny'): Promise<NetworkRules>;
}

export interface Change {
  path: string;
  change: 'added' | 'modified' | 'deleted';
  type?: string;
  mode?: number;
  [k: string]: unknown;
}

export interface SandboxInfo {
  name: string;
  status: 'creating' | 'running' | 'paused' | 'stopping' | 'stopped' | 'dead';
  owner_uid: number;
  [k: string]: unknown;
}

export class Client {
  constructor(opts?: ConnectOptions);
  health(): Promise<{ status: 'ok' | 'draining' }>;
  version(): Promise<{ brig: string; api: string }>;
  doctor(): Promise<{ ok: boolean; doctor: Record<string, unknown> }>;
  list(): Promise<Sandbox[]>;
  create(opts?: CreateOptions): Promise<Sandbox>;
  /** the server's warm pools (brig pool --size N --name NAME) */
  pools(): Promise<PoolInfo[]>;
  /** a command to its end in a fresh sandbox: a ready member of the pool named `pool`, as the pool made it */
  runInPool(pool: string, cmd: Command, opts?: ExecOptions): Promise<Result>;
  connect(name: string): Promise<Sandbox>;
  close(): void;
}

export interface PoolInfo {
  key: string;
  names: string[];
  size: number;
  ready: number;
  in_use: number;
  daemon_pid?: number;
  workspace: string;
  failing: string | null;
}

export class Sandbox {
  readonly client: Client;
  readonly name: string;
  info: SandboxInfo | Record<string, unknown>;
  readonly files: Files;
  readonly network: Network;
  static create(opts?: CreateOptions & ConnectOptions & { client?: Client }): Promise<Sandbox>;
  static connect(name: string, opts?: ConnectOptions & { client?: Client }): Promise<Sandbox>;
  static list(opts?: ConnectOptions & { client?: Client }): Promise<Sandbox[]>;
  /** create one, run fn, remove it whatever happened */
  static with<T>(opts: CreateOptions & ConnectOptions & { client?: Client }, fn: (sb: Sandbox) => Promise<T>): Promise<T>;
  refresh(): Promise<SandboxInfo>;
  status(): Promise<SandboxInfo['status']>;
  remove(opts?: { missingOk?: boolean }): Promise<void>;
  stop(): Promise<this>;
  startSandbox(): Promise<this>;
  pause(): Promise<this>;
  resume(): Promise<this>;
  run(cmd: Command, opts?: ExecOptions): Promise<Result>;
  stream(cmd: Command, opts?: ExecOptions & { tty?: boolean }): OutputStream;
  start(cmd: Command, opts?: StartOptions): Promise<Process>;
  exec(cmd: Command, opts?: StartOptions): Promise<Process>;
  processes(): Promise<Process[]>;
  diff(opts?: { paths?: string[]; excludes?: string[] }): Promise<Change[]>;
  commit(opts?: { paths?: string[]; excludes?: string[] }): Promise<Change[]>;
  reset(): Promise<this>;
  snapshot(tag: string): Promise<Record<string, unknown>>;
  snapshots(): Promise<Array<Record<string, unknown>>>;
  restore(tag: string): Promise<this>;
  fork(tag: string, name?: string): Promise<Sandbox>;
  removeSnapshot(tag: string): Promise<void>;
  events(opts?: { follow?: boolean }): AsyncGenerator<Record<string, unknown>>;
  // Where the runtime has Symbol.asyncDispose (Node 20.4+), Sandbox has it
  // too (`await using`); not declared here, so that the types compile
  // without lib esnext.disposable.
}

export function defaultSocket(): string;

export class BrigError extends Error {
  code: string;
  status: number;
  details: unknown;
}
export class ConnectionError extends BrigError {}
export class ProtocolError extends BrigError {}
export class BadRequest extends BrigError {}
export class Unauthorized extends BrigError {}
export class NotFound extends BrigError {}
export class Conflict extends BrigError {}
export class LimitExceeded extends BrigError {}
export class ServerError extends BrigError {}
export class UnsafeArchive extends BrigError {}
export class CommandFailed extends BrigError {
  result: Result;
}
