/*
 * hvpxe's zero-copy artifact sender: sends a byte range of an open file to a TCP socket with
 * sendfile(2), on a thread of its own per transfer. Node 20 has no sendfile, and streaming through
 * user space costs two copies of every byte (page cache -> buffer -> socket); with sendfile the
 * kernel hands page-cache pages to the socket (docs/performance.md, "hvpxe artifact throughput").
 *
 * send(socketFd, fileFd, offset, length, stallMs, callback) -> handle
 *   Duplicates both descriptors (the caller may close its own at any time: ours are never reused
 *   under us), then loops sendfile/poll on the non-blocking socket until `length` bytes are sent.
 *   callback(code, sent) runs on the JS thread once the thread is done: code null when all was
 *   sent, else "ENODATA" (the file ended before the range did), "ETIMEDOUT" (no byte accepted for
 *   stallMs), "ECANCELED" (cancel was called) or the errno name of the failed call ("EPIPE"...).
 * cancel(handle)
 *   Ends the transfer within POLL_SLICE_MS; its callback then reports ECANCELED (or completion).
 */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long a thread waits in poll before it looks at its cancel flag again. */
#define POLL_SLICE_MS 250
/* sendfile moves at most this many bytes per call (sendfile(2), NOTES). */
#define SENDFILE_MAX 0x7ffff000
#define THREAD_STACK (64 * 1024)

typedef struct {
  int sock;
  int file;
  int64_t offset;
  int64_t remaining;
  int64_t stall_ms;
  int64_t sent;
  int err; /* 0, or an errno value */
  atomic_int cancelled;
  napi_threadsafe_function tsfn;
  /* Owners on the JS thread: the transfer (until its callback ran) and the handle (until collected). */
  int owners;
} transfer;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void release_owner(transfer *t) {
  if (--t->owners == 0) free(t);
}

static void *run(void *arg) {
  transfer *t = arg;
  int64_t last_progress = now_ms();
  while (t->remaining > 0) {
    if (atomic_load(&t->cancelled)) {
      t->err = ECANCELED;
      break;
    }
    size_t want = t->remaining > SENDFILE_MAX ? SENDFILE_MAX : (size_t)t->remaining;
    off_t off = (off_t)t->offset;
    ssize_t n = sendfile(t->sock, t->file, &off, want);
    if (n > 0) {
      t->offset += n;
      t->remaining -= n;
      t->sent += n;
      last_progress = now_ms();
      continue;
    }
    if (n == 0) {
      t->err = ENODATA;
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      t->err = errno;
      break;
    }
    int64_t idle = now_ms() - last_progress;
    if (idle >= t->stall_ms) {
      t->err = ETIMEDOUT;
      break;
    }
    int64_t wait = t->stall_ms - idle;
    struct pollfd p = {.fd = t->sock, .events = POLLOUT};
    /* An error or hang-up shows in the next sendfile's errno. */
    poll(&p, 1, (int)(wait < POLL_SLICE_MS ? wait : POLL_SLICE_MS));
  }
  close(t->sock);
  close(t->file);
  napi_call_threadsafe_function(t->tsfn, t, napi_tsfn_blocking);
  napi_release_threadsafe_function(t->tsfn, napi_tsfn_release);
  return NULL;
}

static const char *errno_code(int e) {
  const char *name = strerrorname_np(e); /* glibc 2.32 */
  return name != NULL ? name : "EIO";
}

static void call_js(napi_env env, napi_value cb, void *context, void *data) {
  (void)context;
  transfer *t = data;
  if (env != NULL && cb != NULL) {
    napi_value args[2], undefined;
    napi_get_undefined(env, &undefined);
    if (t->err == 0) napi_get_null(env, &args[0]);
    else napi_create_string_utf8(env, errno_code(t->err), NAPI_AUTO_LENGTH, &args[0]);
    napi_create_double(env, (double)t->sent, &args[1]);
    napi_call_function(env, undefined, cb, 2, args, NULL);
  }
  release_owner(t);
}

static void finalize_handle(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  release_owner(data);
}

static napi_value throw_error(napi_env env, const char *code, const char *message) {
  napi_throw_error(env, code, message);
  return NULL;
}

static int dup_cloexec(int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 3); }

static napi_value send_range(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 6)
    return throw_error(env, "EINVAL", "send(socketFd, fileFd, offset, length, stallMs, callback) takes six arguments");
  int32_t sock, file;
  int64_t offset, length, stall_ms;
  napi_valuetype cb_type;
  if (napi_get_value_int32(env, argv[0], &sock) != napi_ok || napi_get_value_int32(env, argv[1], &file) != napi_ok ||
      napi_get_value_int64(env, argv[2], &offset) != napi_ok || napi_get_value_int64(env, argv[3], &length) != napi_ok ||
      napi_get_value_int64(env, argv[4], &stall_ms) != napi_ok || napi_typeof(env, argv[5], &cb_type) != napi_ok ||
      cb_type != napi_function)
    return throw_error(env, "EINVAL", "send: socketFd, fileFd, offset, length and stallMs must be numbers and callback a function");
  if (offset < 0 || length < 0 || stall_ms <= 0)
    return throw_error(env, "EINVAL", "send: offset and length must not be negative, stallMs must be positive");
  struct stat st;
  if (fstat(sock, &st) != 0 || !S_ISSOCK(st.st_mode)) return throw_error(env, "ENOTSOCK", "send: socketFd is not a socket");
  if (fstat(file, &st) != 0 || !S_ISREG(st.st_mode)) return throw_error(env, "EINVAL", "send: fileFd is not a regular file");

  transfer *t = calloc(1, sizeof *t);
  if (t == NULL) return throw_error(env, "ENOMEM", "send: out of memory");
  t->offset = offset;
  t->remaining = length;
  t->stall_ms = stall_ms;
  t->owners = 2;
  t->sock = dup_cloexec(sock);
  t->file = t->sock < 0 ? -1 : dup_cloexec(file);
  if (t->file < 0) {
    int e = errno;
    if (t->sock >= 0) close(t->sock);
    free(t);
    return throw_error(env, errno_code(e), "send: could not duplicate the socket's or the file's descriptor");
  }

  napi_value name, handle;
  napi_create_string_utf8(env, "hvpxe zero-copy send", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[5], NULL, name, 0, 1, NULL, NULL, NULL, call_js, &t->tsfn) != napi_ok) {
    close(t->sock);
    close(t->file);
    free(t);
    return throw_error(env, "EIO", "send: could not create the completion callback");
  }
  if (napi_create_external(env, t, finalize_handle, NULL, &handle) != napi_ok) {
    /* Nothing references t but us: no thread runs, release the callback and free it here. */
    napi_release_threadsafe_function(t->tsfn, napi_tsfn_abort);
    close(t->sock);
    close(t->file);
    free(t);
    return throw_error(env, "EIO", "send: could not create the transfer's handle");
  }

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, THREAD_STACK);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  int rc = pthread_create(&thread, &attr, run, t);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    /* The handle owns t from here on (its finalizer frees it once the transfer's share is gone). */
    t->owners = 1;
    napi_release_threadsafe_function(t->tsfn, napi_tsfn_abort);
    close(t->sock);
    close(t->file);
    return throw_error(env, "EAGAIN", "send: could not start the sending thread");
  }
  return handle;
}

static napi_value cancel_range(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void *data = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 1 ||
      napi_get_value_external(env, argv[0], &data) != napi_ok)
    return throw_error(env, "EINVAL", "cancel(handle) takes the handle send returned");
  atomic_store(&((transfer *)data)->cancelled, 1);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"send", NULL, send_range, NULL, NULL, NULL, napi_enumerable, NULL},
      {"cancel", NULL, cancel_range, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, 2, props);
  return exports;
}

NAPI_MODULE(zero_copy_send, init)
