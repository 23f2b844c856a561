'use strict';
// Errors of the brig SDK: every error object the server answers with
// ({"error": {"code", "message", "details"}}) becomes a BrigError subclass
// chosen by its HTTP status, carrying the server's code, message and
// details unchanged.

class BrigError extends Error {
  constructor(message, { code = 'error', status = 0, details = null } = {}) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.details = details;
  }
}
class ConnectionError extends BrigError {}
class ProtocolError extends BrigError {}
class BadRequest extends BrigError {}
class Unauthorized extends BrigError {}
class NotFound extends BrigError {}
class Conflict extends BrigError {}
class LimitExceeded extends BrigError {}
class ServerError extends BrigError {}
class UnsafeArchive extends BrigError {}
class CommandFailed extends BrigError {
  constructor(result) {
    super(`command failed: ${result.summary || result.error || `exit ${result.exitCode}`}`,
      { code: 'command_failed', details: { exit_code: result.exitCode } });
    this.result = result;
  }
}

function errorForStatus(status, code, message, details) {
  let Cls = BrigError;
  if ([400, 411, 413, 414, 415, 422, 431].includes(status)) Cls = BadRequest;
  else if (status === 401 || status === 403) Cls = Unauthorized;
  else if (status === 404) Cls = NotFound;
  else if (status === 409) Cls = Conflict;
  else if (status === 429 || status === 503) Cls = LimitExceeded;
  else if (status >= 500) Cls = ServerError;
  return new Cls(message, { code, status, details });
}

// The error for an error response; a body that is not the documented error
// object is reported as what it is.
function fromBody(status, body, reason) {
  try {
    const err = JSON.parse(body.toString('utf8')).error;
    if (err && typeof err === 'object') {
      return errorForStatus(status, String(err.code ?? 'error'), String(err.message ?? ''), err.details ?? null);
    }
  } catch (_) { /* below */ }
  const text = JSON.stringify(body.subarray(0, 200).toString('utf8'));
  return errorForStatus(status, `http_${status}`, `${reason || 'error'}: ${text} (not a brig error object)`, null);
}

module.exports = {
  BrigError, ConnectionError, ProtocolError, BadRequest, Unauthorized, NotFound, Conflict, LimitExceeded,
  ServerError, UnsafeArchive, CommandFailed, errorForStatus, fromBody,
};
