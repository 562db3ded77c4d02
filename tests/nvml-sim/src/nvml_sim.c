/*
 * nvml_sim.c - a simulated libnvidia-ml.so.1 for tests without a GPU.
 *
 * The library exports a subset of the NVML C API with nvml.h semantics
 * (names, argument types, struct layouts, return codes).  The simulated
 * node lives in a text state file (see ../FORMAT.md); it is read at the first
 * nvmlInit of a reference-counted session and written back after every call
 * that changes it (MIG mode, GPU/compute instances, fired faults).
 *
 * Layout of this file:
 *   1. limits, internal types, globals
 *   2. small helpers (strings, numbers, percent coding, hashing)
 *   3. state file: locking, parsing, writing, boot handling; the read-only
 *      snapshot served on the nvidia-persistenced socket (inside containers)
 *   4. fault injection
 *   5. handle tables and argument resolution
 *   6. MIG geometry (placements, ids, capacity)
 *   7. API implementations (static, called with the global lock held)
 *   8. exported entry points (thin wrappers that take the lock)
 */
#define _DEFAULT_SOURCE
#include "nvml_abi.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#define SIM_API __attribute__((visibility("default")))

/* ======================================================================== */
/* 1. limits, internal types, globals                                       */
/* ======================================================================== */

#define DEFAULT_STATE_PATH "/var/lib/nvml-sim/state"
#define DEFAULT_RUN_DIR "/run/nvml-sim"
/* Where nvidia-ctk's CDI spec bind-mounts the persistenced socket from; a
 * container gets it, but not /var/lib/nvml-sim/state. */
#define DEFAULT_SOCKET "/run/nvidia-persistenced/socket"
#define LEGACY_SOCKET "/var/run/nvidia-persistenced/socket"
#define SOCKET_TIMEOUT_S 5
#define STATE_HEADER "nvml-sim 1"

#define MAX_GPUS 32
#define MAX_PROFILES 24
#define MAX_PLACEMENTS 16
#define MAX_GI_IDS 32       /* GI ids per GPU: 15 on an 8-unit grid */
#define MAX_CI_IDS 8        /* CI ids per GI: at most one per compute slice */
#define MAX_PROCS 256
#define MAX_FAULTS 128
#define MAX_KV 64           /* key=value pairs per record */
#define EXTRA_LEN 256       /* unknown key=value pairs kept for write-back */
/* A gpu record also keeps its health keys verbatim there (see on_gpu). */
#define GPU_EXTRA_LEN 1024
#define CALL_LEN 96
#define PROC_NAME_LEN 64
#define NOT_IN_MIG 0xFFFFFFFFu

typedef struct {
    unsigned start;
    unsigned size;
} span_t;

typedef struct {
    unsigned index;       /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned id;          /* unique profile id (nvidia-smi "ID") */
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned slices;      /* compute slices: the N of "Ng" */
    unsigned instances;
    unsigned sm, ce, dec, enc, jpeg, ofa, p2p;
    unsigned long long memory_mb;
    unsigned ci_slices_mask; /* bit s: a CI profile of s slices exists; 0 = FORMAT default */
    unsigned nplacements;
    span_t placements[MAX_PLACEMENTS];
    char extra[EXTRA_LEN];
} sim_profile_t;

typedef struct {
    int present;
    unsigned profile_id;
    span_t span;          /* memory slices */
    char extra[EXTRA_LEN];
} sim_gi_t;

typedef struct {
    int present;
    unsigned profile;     /* NVML_COMPUTE_INSTANCE_PROFILE_* (== CI profile id) */
    span_t span;          /* compute slices inside the GI */
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char extra[EXTRA_LEN];
} sim_ci_t;

/* Health keys of a gpu record (FORMAT.md "Health"). Absent keys read as a
 * healthy GPU; -1 marks "absent: the call answers NVML_ERROR_NOT_SUPPORTED". */
typedef struct {
    int lost;
    int ecc_supported;
    unsigned ecc_mode, ecc_pending;
    unsigned long long ecc_vol_corr, ecc_vol_uncorr, ecc_agg_corr, ecc_agg_uncorr;
    int retired_pages_supported;  /* -1: derived from arch (pre-Ampere with ECC) */
    unsigned retired_sbe, retired_dbe, retired_pending;
    int remapped_rows_supported;  /* -1: derived from arch (Ampere and later with ECC) */
    unsigned remap_corr, remap_uncorr, remap_pending, remap_failure;
    long long recovery_action;    /* < 0: the driver lacks field 230 */
    long long pcie_gen, pcie_gen_max, pcie_width, pcie_width_max; /* max < 0: no PCIe info */
    unsigned pcie_replay;
    unsigned nvlinks;
    unsigned long long nvlink_down; /* bit L: link L inactive */
    int fabric_state;               /* -1: the GPU has no fabric probe */
    int fabric_status;
    unsigned clique_id;
    unsigned char cluster_uuid[NVML_GPU_FABRIC_UUID_LEN];
    long long temp, temp_slowdown, temp_shutdown;
    unsigned long long clock_event_reasons;
    long long power_mw, power_limit_mw;
} sim_health_t;

typedef struct {
    int present;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE];
    char part[NVML_DEVICE_PART_NUMBER_BUFFER_SIZE];
    char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    unsigned pci_domain, pci_bus, pci_device, pci_device_id, pci_subsystem_id;
    unsigned minor;
    unsigned long long memory_total, memory_reserved;
    unsigned arch;
    int cc_major, cc_minor;
    unsigned sm_count;
    unsigned persistence;
    unsigned mig_capable, mig_current, mig_pending;
    int mig_toggle_reboot;
    /* the driver answers GPU-instance profile queries with MIG off (FORMAT.md) */
    int mig_profiles_off;
    unsigned nprofiles;
    sim_profile_t profiles[MAX_PROFILES];
    sim_gi_t gis[MAX_GI_IDS];
    sim_ci_t cis[MAX_GI_IDS][MAX_CI_IDS];
    sim_health_t health;
    char extra[GPU_EXTRA_LEN];
} sim_gpu_t;

typedef struct {
    unsigned gpu;
    unsigned pid;
    unsigned long long used_memory;
    int gi, ci;
    char name[PROC_NAME_LEN];
    char extra[EXTRA_LEN];
} sim_proc_t;

typedef struct {
    char call[CALL_LEN];
    int error;
    int once;
    long skip;
    int gpu;
    char extra[EXTRA_LEN];
} sim_fault_t;

typedef struct {
    char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    char nvml_version[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    int cuda_driver_version;
    int driver_loaded;
    int libcuda;
    char extra[EXTRA_LEN];
} sim_system_t;

typedef struct {
    char path[PATH_MAX];
    /* Read from the persistenced socket: booted as served, never written
     * back, and calls that would change it get NVML_ERROR_NO_PERMISSION. */
    int snapshot;
    sim_system_t sys;
    unsigned ngpus;
    sim_gpu_t gpus[MAX_GPUS];
    unsigned nprocs;
    sim_proc_t procs[MAX_PROCS];
    unsigned nfaults;
    sim_fault_t faults[MAX_FAULTS];
} sim_state_t;

/* Handles are addresses inside these static tables, so they stay valid (and
 * identical) for the lifetime of the process; whether one currently refers to
 * something is decided from its coordinates against the live state. */
struct nvmlDevice_st {
    unsigned gpu;
    int mig;
    unsigned gi, ci;
};
struct nvmlGpuInstance_st {
    unsigned gpu, gi;
};
struct nvmlComputeInstance_st {
    unsigned gpu, gi, ci;
};

static struct nvmlDevice_st g_dev[MAX_GPUS];
static struct nvmlDevice_st g_migdev[MAX_GPUS][MAX_GI_IDS][MAX_CI_IDS];
static struct nvmlGpuInstance_st g_gih[MAX_GPUS][MAX_GI_IDS];
static struct nvmlComputeInstance_st g_cih[MAX_GPUS][MAX_GI_IDS][MAX_CI_IDS];
static int g_handles_ready;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_refcount;
static sim_state_t *g_state; /* non-NULL exactly while initialised */
static uid_t g_euid;

/* CI profile index -> compute slices (0 = not a derived profile). */
static const unsigned k_ci_slices[NVML_COMPUTE_INSTANCE_PROFILE_COUNT] = {1, 2, 3, 4, 7, 8, 6, 0, 0};

/* ======================================================================== */
/* 2. small helpers                                                         */
/* ======================================================================== */

static const struct {
    nvmlReturn_t code;
    const char *name;
    const char *text;
} k_errors[] = {
    {NVML_SUCCESS, "NVML_SUCCESS", "Success"},
    {NVML_ERROR_UNINITIALIZED, "NVML_ERROR_UNINITIALIZED", "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "NVML_ERROR_INVALID_ARGUMENT", "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED", "Not Supported"},
    {NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION", "Insufficient Permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "NVML_ERROR_ALREADY_INITIALIZED", "Already Initialized"},
    {NVML_ERROR_NOT_FOUND, "NVML_ERROR_NOT_FOUND", "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "NVML_ERROR_INSUFFICIENT_SIZE", "Insufficient Size"},
    {NVML_ERROR_INSUFFICIENT_POWER, "NVML_ERROR_INSUFFICIENT_POWER", "Insufficient External Power"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED", "Driver Not Loaded"},
    {NVML_ERROR_TIMEOUT, "NVML_ERROR_TIMEOUT", "Timeout"},
    {NVML_ERROR_IRQ_ISSUE, "NVML_ERROR_IRQ_ISSUE", "Interrupt Request Issue"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML Shared Library Not Found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "NVML_ERROR_FUNCTION_NOT_FOUND", "Function Not Found"},
    {NVML_ERROR_CORRUPTED_INFOROM, "NVML_ERROR_CORRUPTED_INFOROM", "Corrupted infoROM"},
    {NVML_ERROR_GPU_IS_LOST, "NVML_ERROR_GPU_IS_LOST", "GPU is lost"},
    {NVML_ERROR_RESET_REQUIRED, "NVML_ERROR_RESET_REQUIRED", "GPU requires reset"},
    {NVML_ERROR_OPERATING_SYSTEM, "NVML_ERROR_OPERATING_SYSTEM", "GPU access blocked by the operating system"},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "Driver/library version mismatch"},
    {NVML_ERROR_IN_USE, "NVML_ERROR_IN_USE", "In use by another client"},
    {NVML_ERROR_MEMORY, "NVML_ERROR_MEMORY", "Insufficient Memory"},
    {NVML_ERROR_NO_DATA, "NVML_ERROR_NO_DATA", "No data"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", "vGPU ECC not supported"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "NVML_ERROR_INSUFFICIENT_RESOURCES", "Insufficient Resources"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "NVML_ERROR_FREQ_NOT_SUPPORTED", "Invalid Frequency"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "Argument version mismatch"},
    {NVML_ERROR_DEPRECATED, "NVML_ERROR_DEPRECATED", "Requested functionality has been deprecated"},
    {NVML_ERROR_NOT_READY, "NVML_ERROR_NOT_READY", "System is not in ready state"},
    {NVML_ERROR_GPU_NOT_FOUND, "NVML_ERROR_GPU_NOT_FOUND", "GPU not found"},
    {NVML_ERROR_INVALID_STATE, "NVML_ERROR_INVALID_STATE", "Invalid state"},
    {NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED", "Reset type not supported"},
    {NVML_ERROR_UNKNOWN, "NVML_ERROR_UNKNOWN", "Unknown Error"},
};

static void warnx_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warnx_(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("nvml-sim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Bounded copy that always terminates; returns 0 when src was truncated. */
static int scopy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size) {
        memcpy(dst, src, size - 1);
        dst[size - 1] = '\0';
        return 0;
    }
    memcpy(dst, src, n + 1);
    return 1;
}

/* nvml.h string out-parameters: the caller's length must hold the NUL too. */
static nvmlReturn_t copy_out(char *dst, unsigned int length, const char *src)
{
    size_t need = strlen(src) + 1;
    if (length < need)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, need);
    return NVML_SUCCESS;
}

/* FORMAT.md: integers are decimal unless they start with 0x. */
static int parse_ll(const char *s, long long *out)
{
    int base = 10;
    const char *p = s;
    char *end = NULL;
    long long v;
    if (*p == '-' || *p == '+')
        p++;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        base = 16;
    if (!*s)
        return 0;
    errno = 0;
    if (base == 16) {
        unsigned long long u = strtoull(p + 2, &end, 16);
        v = (long long)u;
        if (*s == '-')
            v = -v;
        if (end == p + 2)
            return 0;
    } else {
        v = strtoll(s, &end, 10);
        if (end == s)
            return 0;
    }
    if (errno || *end)
        return 0;
    *out = v;
    return 1;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode src into dst; a malformed escape is kept literally. */
static void pct_decode(char *dst, size_t size, const char *src)
{
    size_t o = 0;
    for (const char *p = src; *p && o + 1 < size; p++) {
        if (p[0] == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
            dst[o++] = (char)(hexval(p[1]) * 16 + hexval(p[2]));
            p += 2;
        } else {
            dst[o++] = *p;
        }
    }
    dst[o] = '\0';
}

/* Percent-encode what would break the record syntax: '%', '=', blanks and
 * control characters (FORMAT.md lists %20/%25/%3D; the rest is defensive). */
static void pct_encode(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '%' || *p == '=' || *p <= 0x20 || *p == 0x7f)
            fprintf(f, "%%%02X", *p);
        else
            fputc(*p, f);
    }
}

static uint64_t fnv1a64(const char *s, uint64_t h)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* MIG device UUID: deterministic in (GPU UUID, GI id, CI id).  simctl.py
 * derives the same value for rendered fixtures. */
static void mig_uuid(char *out, size_t size, const char *gpu_uuid, unsigned gi, unsigned ci)
{
    char key[160];
    snprintf(key, sizeof key, "%s/%u/%u", gpu_uuid, gi, ci);
    uint64_t h1 = fnv1a64(key, 0xcbf29ce484222325ULL);
    uint64_t h2 = fnv1a64(key, h1 ^ 0x9e3779b97f4a7c15ULL);
    snprintf(out, size, "MIG-%08x-%04x-%04x-%04x-%012llx", (unsigned)(h1 >> 32), (unsigned)((h1 >> 16) & 0xffff),
             (unsigned)(h1 & 0xffff), (unsigned)(h2 >> 48), (unsigned long long)(h2 & 0xffffffffffffULL));
}

static int error_from_name(const char *s, int *out)
{
    char buf[64];
    for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++) {
        const char *name = k_errors[i].name;
        snprintf(buf, sizeof buf, "%s", name + strlen("NVML_ERROR_"));
        if (strcmp(s, name) == 0 || strcmp(s, buf) == 0) {
            *out = (int)k_errors[i].code;
            return 1;
        }
    }
    return 0;
}

/* "0000:07:00.0", "00000000:07:00.0" or "07:00.0" (hex) -> numbers. */
static int parse_bus_id(const char *s, unsigned *domain, unsigned *bus, unsigned *dev, unsigned *fn)
{
    unsigned d = 0, b = 0, v = 0, f = 0;
    char tail;
    if (sscanf(s, "%x:%x:%x.%x%c", &d, &b, &v, &f, &tail) == 4 ||
        (d = 0, sscanf(s, "%x:%x.%x%c", &b, &v, &f, &tail) == 3)) {
        if (b > 0xff || v > 0x1f || f > 7)
            return 0;
        *domain = d;
        *bus = b;
        *dev = v;
        *fn = f;
        return 1;
    }
    return 0;
}

/* ======================================================================== */
/* 3. state file                                                            */
/* ======================================================================== */

static const char *state_path(void)
{
    const char *p = getenv("NVML_SIM_STATE");
    return (p && *p) ? p : DEFAULT_STATE_PATH;
}

static const char *run_dir(void)
{
    const char *p = getenv("NVML_SIM_RUNDIR");
    return (p && *p) ? p : DEFAULT_RUN_DIR;
}

/* Exclusive flock on "<path>.lock", shared with simctl.py.  Returns the fd,
 * or -1 when the lock file cannot be opened (read-only locations): reading
 * then proceeds unlocked rather than failing. */
static int lock_state(const char *path)
{
    char lpath[PATH_MAX + 8];
    snprintf(lpath, sizeof lpath, "%s.lock", path);
    int fd = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        fd = open(lpath, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

static void unlock_state(int fd)
{
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        close(fd);
    }
}

/* ---- parsing ----------------------------------------------------------- */

typedef struct {
    char *key;
    char *val;  /* decoded */
    char *raw;  /* as written, for unknown keys */
    int used;
} kv_t;

typedef struct {
    char *type;
    kv_t kv[MAX_KV];
    int n;
    int lineno;
    char *text;     /* original line, for messages */
    char *storage;  /* one allocation backing type/key/val/raw */
} rec_t;

typedef struct {
    const char *path;
    int lineno;
    const char *text;
} pctx_t;

static void perr(const pctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void perr(const pctx_t *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    warnx_("%s:%d: %s: %s", c->path, c->lineno, msg, c->text ? c->text : "");
}

static void rec_free(rec_t *r)
{
    free(r->storage);
    free(r->text);
}

/* Split one record line into type and key=value pairs. */
static int rec_parse(rec_t *r, const char *line, int lineno, const pctx_t *ctx)
{
    size_t len = strlen(line);
    memset(r, 0, sizeof *r);
    r->lineno = lineno;
    r->text = strdup(line);
    /* tokens are copied twice: once raw, once decoded (never longer) */
    r->storage = malloc(2 * len + 2);
    if (!r->text || !r->storage)
        return 0;
    char *raw = r->storage;
    char *dec = r->storage + len + 1;
    memcpy(raw, line, len + 1);

    char *save = NULL;
    char *tok = strtok_r(raw, " \t\r\n", &save);
    r->type = tok;
    while ((tok = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok) {
            perr(ctx, "expected key=value, got '%s'", tok);
            return 0;
        }
        if (r->n == MAX_KV) {
            perr(ctx, "too many fields");
            return 0;
        }
        kv_t *kv = &r->kv[r->n++];
        /* raw form "key=value" stays intact for write-back; key and the
         * decoded value are built in the second half of storage */
        kv->raw = tok;
        size_t klen = (size_t)(eq - tok);
        kv->key = dec;
        memcpy(dec, tok, klen);
        dec[klen] = '\0';
        dec += klen + 1;
        kv->val = dec;
        pct_decode(dec, strlen(eq + 1) + 1, eq + 1);
        dec += strlen(dec) + 1;
    }
    return r->type != NULL;
}

static const char *kv_take(rec_t *r, const char *key)
{
    for (int i = 0; i < r->n; i++) {
        if (!r->kv[i].used && strcmp(r->kv[i].key, key) == 0) {
            r->kv[i].used = 1;
            return r->kv[i].val;
        }
    }
    return NULL;
}

/* Integer field; returns 0 (after reporting) when required and missing or
 * when malformed.  Absent optional fields leave *out untouched. */
static int take_ll(rec_t *r, const pctx_t *c, const char *key, long long *out, int required)
{
    const char *v = kv_take(r, key);
    if (!v) {
        if (required)
            perr(c, "missing required key '%s'", key);
        return !required;
    }
    if (!parse_ll(v, out)) {
        perr(c, "key '%s': '%s' is not an integer", key, v);
        return 0;
    }
    return 1;
}

static int take_u(rec_t *r, const pctx_t *c, const char *key, unsigned *out, int required)
{
    long long v = *out;
    if (!take_ll(r, c, key, &v, required))
        return 0;
    if (v < 0 || v > 0xFFFFFFFFLL) {
        perr(c, "key '%s' out of range", key);
        return 0;
    }
    *out = (unsigned)v;
    return 1;
}

static int take_i(rec_t *r, const pctx_t *c, const char *key, int *out, int required)
{
    long long v = *out;
    if (!take_ll(r, c, key, &v, required))
        return 0;
    if (v < INT_MIN || v > INT_MAX) {
        perr(c, "key '%s' out of range", key);
        return 0;
    }
    *out = (int)v;
    return 1;
}

static int take_ull(rec_t *r, const pctx_t *c, const char *key, unsigned long long *out, int required)
{
    long long v = (long long)*out;
    if (!take_ll(r, c, key, &v, required))
        return 0;
    if (v < 0) {
        perr(c, "key '%s' must not be negative", key);
        return 0;
    }
    *out = (unsigned long long)v;
    return 1;
}

static void take_s(rec_t *r, const char *key, char *out, size_t size)
{
    const char *v = kv_take(r, key);
    if (v)
        scopy(out, size, v);
}

/* Keep unknown keys so a write-back does not drop what newer tools added. */
static void keep_extra_n(rec_t *r, char *extra, size_t size, const pctx_t *c)
{
    size_t o = 0;
    extra[0] = '\0';
    for (int i = 0; i < r->n; i++) {
        if (r->kv[i].used)
            continue;
        size_t n = strlen(r->kv[i].raw);
        if (o + n + 2 > size) {
            perr(c, "unknown keys too long to keep, dropping '%s'", r->kv[i].key);
            continue;
        }
        if (o)
            extra[o++] = ' ';
        memcpy(extra + o, r->kv[i].raw, n + 1);
        o += n;
    }
}

static void keep_extra(rec_t *r, char *extra, const pctx_t *c) { keep_extra_n(r, extra, EXTRA_LEN, c); }

static sim_gpu_t *gpu_ref(sim_state_t *st, rec_t *r, const pctx_t *c)
{
    unsigned idx = 0;
    if (!take_u(r, c, "gpu", &idx, 1))
        return NULL;
    if (idx >= MAX_GPUS || !st->gpus[idx].present) {
        perr(c, "gpu %u has no gpu record", idx);
        return NULL;
    }
    return &st->gpus[idx];
}

static sim_profile_t *profile_by_id(sim_gpu_t *g, unsigned id)
{
    for (unsigned i = 0; i < g->nprofiles; i++)
        if (g->profiles[i].id == id)
            return &g->profiles[i];
    return NULL;
}

static sim_profile_t *profile_by_index(sim_gpu_t *g, unsigned index)
{
    for (unsigned i = 0; i < g->nprofiles; i++)
        if (g->profiles[i].index == index)
            return &g->profiles[i];
    return NULL;
}

static int on_system(sim_state_t *st, rec_t *r, const pctx_t *c)
{
    sim_system_t *s = &st->sys;
    s->driver_loaded = 1;
    s->libcuda = 1;
    take_s(r, "driver_version", s->driver_version, sizeof s->driver_version);
    take_s(r, "nvml_version", s->nvml_version, sizeof s->nvml_version);
    if (!take_i(r, c, "cuda_driver_version", &s->cuda_driver_version, 0) ||
        !take_i(r, c, "driver_loaded", &s->driver_loaded, 0) || !take_i(r, c, "libcuda", &s->libcuda, 0))
        return 0;
    keep_extra(r, s->extra, c);
    return 1;
}


/* ---- health keys ------------------------------------------------------- */
/* The health keys stay in the gpu record's unknown-key text: they are read
 * here without being consumed, so a write-back keeps them exactly as written
 * (simctl edits them between sessions; the library never changes them). */

static const char *kv_peek(const rec_t *r, const char *key)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->kv[i].key, key) == 0)
            return r->kv[i].val;
    return NULL;
}

/* Optional integer in [lo, hi]; absent leaves *out alone. */
static int peek_ll(const rec_t *r, const pctx_t *c, const char *key, long long lo, long long hi, long long *out)
{
    const char *v = kv_peek(r, key);
    long long n;
    if (!v)
        return 1;
    if (!parse_ll(v, &n) || n < lo || n > hi) {
        perr(c, "key '%s': '%s' is not an integer in [%lld, %lld]", key, v, lo, hi);
        return 0;
    }
    *out = n;
    return 1;
}

static int peek_u(const rec_t *r, const pctx_t *c, const char *key, unsigned *out)
{
    long long n = *out;
    if (!peek_ll(r, c, key, 0, 0xFFFFFFFFLL, &n))
        return 0;
    *out = (unsigned)n;
    return 1;
}

static int peek_ull(const rec_t *r, const pctx_t *c, const char *key, unsigned long long *out)
{
    long long n = (long long)*out;
    if (!peek_ll(r, c, key, 0, LLONG_MAX, &n))
        return 0;
    *out = (unsigned long long)n;
    return 1;
}

static int peek_flag(const rec_t *r, const pctx_t *c, const char *key, int *out)
{
    long long n = *out;
    if (!peek_ll(r, c, key, 0, 1, &n))
        return 0;
    *out = (int)n;
    return 1;
}

static const char *const k_fabric_states[] = {"not_supported", "not_started", "in_progress", "completed"};

static int parse_fabric(const rec_t *r, const pctx_t *c, sim_health_t *h)
{
    const char *state = kv_peek(r, "fabric_state");
    if (!state)
        return 1;
    long long n;
    h->fabric_state = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(state, k_fabric_states[i]) == 0)
            h->fabric_state = i;
    if (h->fabric_state < 0 && parse_ll(state, &n) && n >= 0 && n <= 3)
        h->fabric_state = (int)n;
    if (h->fabric_state < 0) {
        perr(c, "fabric_state must be not_supported, not_started, in_progress or completed (or 0..3)");
        return 0;
    }
    const char *status = kv_peek(r, "fabric_status");
    if (status && !(parse_ll(status, &n) && (h->fabric_status = (int)n, 1)) &&
        !error_from_name(status, &h->fabric_status) && strcmp(status, "SUCCESS") != 0 &&
        strcmp(status, "NVML_SUCCESS") != 0) {
        perr(c, "fabric_status must be an NVML return code (number or name)");
        return 0;
    }
    if (!peek_u(r, c, "clique_id", &h->clique_id))
        return 0;
    const char *uuid = kv_peek(r, "cluster_uuid");
    if (uuid) {
        unsigned k = 0;
        for (const char *p = uuid; *p; p++) {
            if (*p == '-')
                continue;
            int v = hexval((unsigned char)*p);
            if (v < 0 || k >= 2 * NVML_GPU_FABRIC_UUID_LEN) {
                k = 99;
                break;
            }
            h->cluster_uuid[k / 2] = (unsigned char)(h->cluster_uuid[k / 2] << 4 | v);
            k++;
        }
        if (k != 2 * NVML_GPU_FABRIC_UUID_LEN) {
            perr(c, "cluster_uuid must be 32 hex digits (dashes allowed), e.g. 8-4-4-4-12");
            return 0;
        }
    }
    return 1;
}

static int parse_link_list(const rec_t *r, const pctx_t *c, unsigned long long *mask)
{
    const char *v = kv_peek(r, "nvlink_down");
    char buf[256];
    char *save = NULL;
    if (!v || !*v)
        return 1;
    scopy(buf, sizeof buf, v);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long long link;
        if (!parse_ll(tok, &link) || link < 0 || link >= NVML_NVLINK_MAX_LINKS) {
            perr(c, "nvlink_down: '%s' is not a link number below %d", tok, NVML_NVLINK_MAX_LINKS);
            return 0;
        }
        *mask |= 1ULL << link;
    }
    return 1;
}

static int parse_health(const rec_t *r, const pctx_t *c, sim_health_t *h)
{
    /* the healthy defaults (FORMAT.md "Health") */
    memset(h, 0, sizeof *h);
    h->ecc_supported = 1;
    h->ecc_mode = h->ecc_pending = 1;
    h->retired_pages_supported = h->remapped_rows_supported = -1;
    h->pcie_gen = h->pcie_gen_max = h->pcie_width = h->pcie_width_max = -1;
    h->fabric_state = -1;
    h->temp = h->temp_slowdown = h->temp_shutdown = -1;
    h->power_mw = h->power_limit_mw = -1;
    long long nvlinks = 0, rps = -1, rrs = -1;
    int ok = peek_flag(r, c, "lost", &h->lost) && peek_flag(r, c, "ecc_supported", &h->ecc_supported) &&
             peek_u(r, c, "ecc_mode", &h->ecc_mode) && peek_u(r, c, "ecc_pending", &h->ecc_pending) &&
             peek_ull(r, c, "ecc_vol_corr", &h->ecc_vol_corr) && peek_ull(r, c, "ecc_vol_uncorr", &h->ecc_vol_uncorr) &&
             peek_ull(r, c, "ecc_agg_corr", &h->ecc_agg_corr) && peek_ull(r, c, "ecc_agg_uncorr", &h->ecc_agg_uncorr) &&
             peek_ll(r, c, "retired_pages_supported", 0, 1, &rps) && peek_u(r, c, "retired_sbe", &h->retired_sbe) &&
             peek_u(r, c, "retired_dbe", &h->retired_dbe) && peek_u(r, c, "retired_pending", &h->retired_pending) &&
             peek_ll(r, c, "remapped_rows_supported", 0, 1, &rrs) && peek_u(r, c, "remap_corr", &h->remap_corr) &&
             peek_u(r, c, "remap_uncorr", &h->remap_uncorr) && peek_u(r, c, "remap_pending", &h->remap_pending) &&
             peek_u(r, c, "remap_failure", &h->remap_failure) &&
             peek_ll(r, c, "recovery_action", -1, 0xFFFFFFFFLL, &h->recovery_action) &&
             peek_ll(r, c, "pcie_gen_max", 1, 64, &h->pcie_gen_max) &&
             peek_ll(r, c, "pcie_width_max", 1, 64, &h->pcie_width_max) &&
             peek_ll(r, c, "pcie_gen", 1, 64, &h->pcie_gen) && peek_ll(r, c, "pcie_width", 1, 64, &h->pcie_width) &&
             peek_u(r, c, "pcie_replay", &h->pcie_replay) &&
             peek_ll(r, c, "nvlinks", 0, NVML_NVLINK_MAX_LINKS, &nvlinks) && parse_link_list(r, c, &h->nvlink_down) &&
             parse_fabric(r, c, h) && peek_ll(r, c, "temp", 0, 1000, &h->temp) &&
             peek_ll(r, c, "temp_slowdown", 0, 1000, &h->temp_slowdown) &&
             peek_ll(r, c, "temp_shutdown", 0, 1000, &h->temp_shutdown) &&
             peek_ull(r, c, "clock_event_reasons", &h->clock_event_reasons) &&
             peek_ll(r, c, "power_mw", 0, 0xFFFFFFFFLL, &h->power_mw) &&
             peek_ll(r, c, "power_limit_mw", 0, 0xFFFFFFFFLL, &h->power_limit_mw);
    if (!ok)
        return 0;
    h->nvlinks = (unsigned)nvlinks;
    h->retired_pages_supported = (int)rps;
    h->remapped_rows_supported = (int)rrs;
    /* a link degrades from its maximum: current defaults to the maximum */
    if (h->pcie_gen < 0)
        h->pcie_gen = h->pcie_gen_max;
    if (h->pcie_width < 0)
        h->pcie_width = h->pcie_width_max;
    return 1;
}

static int on_gpu(sim_state_t *st, rec_t *r, const pctx_t *c)
{
    unsigned idx = 0;
    if (!take_u(r, c, "index", &idx, 1))
        return 0;
    if (idx >= MAX_GPUS) {
        perr(c, "gpu index %u exceeds the simulator limit of %d", idx, MAX_GPUS);
        return 0;
    }
    sim_gpu_t *g = &st->gpus[idx];
    if (g->present) {
        perr(c, "duplicate gpu index %u", idx);
        return 0;
    }
    g->present = 1;
    take_s(r, "name", g->name, sizeof g->name);
    take_s(r, "uuid", g->uuid, sizeof g->uuid);
    take_s(r, "serial", g->serial, sizeof g->serial);
    take_s(r, "board_part_number", g->part, sizeof g->part);
    take_s(r, "bus_id", g->bus_id, sizeof g->bus_id);
    g->minor = idx;
    char toggle[16] = "immediate";
    take_s(r, "mig_toggle", toggle, sizeof toggle);
    if (strcmp(toggle, "immediate") != 0 && strcmp(toggle, "reboot") != 0) {
        perr(c, "mig_toggle must be 'immediate' or 'reboot'");
        return 0;
    }
    g->mig_toggle_reboot = strcmp(toggle, "reboot") == 0;
    int ok = take_u(r, c, "pci_domain", &g->pci_domain, 0) && take_u(r, c, "pci_bus", &g->pci_bus, 0) &&
             take_u(r, c, "pci_device", &g->pci_device, 0) && take_u(r, c, "pci_device_id", &g->pci_device_id, 0) &&
             take_u(r, c, "pci_subsystem_id", &g->pci_subsystem_id, 0) && take_u(r, c, "minor", &g->minor, 0) &&
             take_ull(r, c, "memory_total", &g->memory_total, 0) &&
             take_ull(r, c, "memory_reserved", &g->memory_reserved, 0) && take_u(r, c, "arch", &g->arch, 0) &&
             take_i(r, c, "cc_major", &g->cc_major, 0) && take_i(r, c, "cc_minor", &g->cc_minor, 0) &&
             take_u(r, c, "sm_count", &g->sm_count, 0) && take_u(r, c, "persistence", &g->persistence, 0) &&
             take_u(r, c, "mig_capable", &g->mig_capable, 0) && take_u(r, c, "mig_current", &g->mig_current, 0) &&
             take_u(r, c, "mig_pending", &g->mig_pending, 0);
    if (!ok)
        return 0;
    /* bus_id is authoritative; the numeric fields follow it */
    if (g->bus_id[0]) {
        unsigned fn;
        if (!parse_bus_id(g->bus_id, &g->pci_domain, &g->pci_bus, &g->pci_device, &fn)) {
            perr(c, "bad bus_id '%s'", g->bus_id);
            return 0;
        }
    }
    snprintf(g->bus_id, sizeof g->bus_id, "%08X:%02X:%02X.0", g->pci_domain, g->pci_bus, g->pci_device);
    g->mig_current = g->mig_current ? 1 : 0;
    g->mig_pending = g->mig_pending ? 1 : 0;
    if (!parse_health(r, c, &g->health))
        return 0;
    g->mig_profiles_off = 0;
    if (!peek_flag(r, c, "mig_profiles_off", &g->mig_profiles_off))
        return 0;
    keep_extra_n(r, g->extra, sizeof g->extra, c);
    return 1;
}

static int parse_ci_slices(const char *v, unsigned *mask)
{
    char buf[64];
    char *save = NULL;
    scopy(buf, sizeof buf, v);
    *mask = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long long s;
        if (!parse_ll(t, &s) || s < 1 || s > 30)
            return 0;
        *mask |= 1u << s;
    }
    return 1;
}

static int on_giprofile(sim_state_t *st, rec_t *r, const pctx_t *c)
{
    sim_gpu_t *g = gpu_ref(st, r, c);
    if (!g)
        return 0;
    if (g->nprofiles == MAX_PROFILES) {
        perr(c, "too many profiles");
        return 0;
    }
    sim_profile_t p;
    memset(&p, 0, sizeof p);
    p.slices = 1;
    p.instances = 1;
    int ok = take_u(r, c, "index", &p.index, 1) && take_u(r, c, "id", &p.id, 1) &&
             take_u(r, c, "slices", &p.slices, 0) && take_u(r, c, "instances", &p.instances, 0) &&
             take_u(r, c, "sm", &p.sm, 0) && take_ull(r, c, "memory_mb", &p.memory_mb, 0) &&
             take_u(r, c, "ce", &p.ce, 0) && take_u(r, c, "dec", &p.dec, 0) && take_u(r, c, "enc", &p.enc, 0) &&
             take_u(r, c, "jpeg", &p.jpeg, 0) && take_u(r, c, "ofa", &p.ofa, 0) && take_u(r, c, "p2p", &p.p2p, 0);
    if (!ok)
        return 0;
    take_s(r, "name", p.name, sizeof p.name);
    const char *cis = kv_take(r, "ci_slices");
    if (cis && !parse_ci_slices(cis, &p.ci_slices_mask)) {
        perr(c, "bad ci_slices '%s'", cis);
        return 0;
    }
    if (p.index >= NVML_GPU_INSTANCE_PROFILE_COUNT || p.slices == 0 || p.slices > 30) {
        perr(c, "profile index or slices out of range");
        return 0;
    }
    if (profile_by_index(g, p.index) || profile_by_id(g, p.id)) {
        perr(c, "duplicate profile index or id");
        return 0;
    }
    keep_extra(r, p.extra, c);
    g->profiles[g->nprofiles++] = p;
    return 1;
}

static int on_placement(sim_state_t *st, rec_t *r, const pctx_t *c)
{
    sim_gpu_t *g = gpu_ref(st, r, c);
    unsigned pid = 0;
    span_t s = {0, 0};
    if (!g || !take_u(r, c, "profile", &pid, 1) || !take_u(r, c, "start", &s.start, 1) ||
        !take_u(r, c, "size", &s.size, 1))
        return 0;
    sim_profile_t *p = profile_by_id(g, pid);
    if (!p) {
        perr(c, "placement for unknown profile id %u", pid);
        return 0;
    }
    if (p->nplacements == MAX_PLACEMENTS || s.size == 0) {
        perr(c, "too many placements, or size 0");
        return 0;
    }
    p->placements[p->nplacements++] = s;
    return 1;
}

static int on_gi(sim_state_t *st, rec_t *r, const pctx_t *c)
{
    sim_gpu_t *g = gpu_ref(st, r, c);
    unsigned id = 0;
    sim_gi_t gi;
    memset(&gi, 0, sizeof gi);
    if (!g || !take_u(r, c, "id", &id, 1) || !take_u(r, c, "profile", &gi.profile_id, 1) ||
        !take_u(r, c, "start", &gi.span.start, 1) || !take_u(r, c, "size", &gi.span.size, 1))
        return 0;
    if (id >= MAX_GI_IDS || g->gis[id].present) {
        perr(c, "GPU instance id %u out of range or duplicate", id);
        return 0;
    }
    if (!profile_by_id(g, gi.profile_id)) {
        perr(c, "GPU instance uses unknown profile id %u", gi.profile_id);
        return 0;
    }
    gi.present = 1;
    keep_extra(r, gi.extra, c);
    g->gis[id] = gi;
    return 1;
}

static int on_ci(sim_state_t *st, rec_t *r, const pctx_t *c)
{
    sim_gpu_t *g = gpu_ref(st, r, c);
    unsigned gid = 0, id = 0;
    sim_ci_t ci;
    memset(&ci, 0, sizeof ci);
    if (!g || !take_u(r, c, "gi", &gid, 1) || !take_u(r, c, "id", &id, 1) ||
        !take_u(r, c, "profile", &ci.profile, 1))
        return 0;
    if (gid >= MAX_GI_IDS || !g->gis[gid].present) {
        perr(c, "compute instance in missing GPU instance %u", gid);
        return 0;
    }
    if (id >= MAX_CI_IDS || g->cis[gid][id].present) {
        perr(c, "compute instance id %u out of range or duplicate", id);
        return 0;
    }
    if (ci.profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT || !k_ci_slices[ci.profile]) {
        perr(c, "unsupported compute instance profile %u", ci.profile);
        return 0;
    }
    ci.span.size = k_ci_slices[ci.profile];
    if (!take_u(r, c, "start", &ci.span.start, 0) || !take_u(r, c, "size", &ci.span.size, 0))
        return 0;
    take_s(r, "uuid", ci.uuid, sizeof ci.uuid);
    if (!ci.uuid[0])
        mig_uuid(ci.uuid, sizeof ci.uuid, g->uuid, gid, id);
    ci.present = 1;
    keep_extra(r, ci.extra, c);
    g->cis[gid][id] = ci;
    return 1;
}

static int on_process(sim_state_t *st, rec_t *r, const pctx_t *c)
{
    sim_gpu_t *g = gpu_ref(st, r, c);
    if (!g)
        return 0;
    if (st->nprocs == MAX_PROCS) {
        perr(c, "too many processes");
        return 0;
    }
    sim_proc_t p;
    memset(&p, 0, sizeof p);
    p.gpu = (unsigned)(g - st->gpus);
    p.gi = -1;
    p.ci = -1;
    if (!take_u(r, c, "pid", &p.pid, 1) || !take_ull(r, c, "used_memory", &p.used_memory, 0) ||
        !take_i(r, c, "gi", &p.gi, 0) || !take_i(r, c, "ci", &p.ci, 0))
        return 0;
    take_s(r, "name", p.name, sizeof p.name);
    keep_extra(r, p.extra, c);
    st->procs[st->nprocs++] = p;
    return 1;
}

static int on_fault(sim_state_t *st, rec_t *r, const pctx_t *c)
{
    if (st->nfaults == MAX_FAULTS) {
        perr(c, "too many faults");
        return 0;
    }
    sim_fault_t f;
    memset(&f, 0, sizeof f);
    f.gpu = -1;
    const char *call = kv_take(r, "call");
    const char *err = kv_take(r, "error");
    if (!call || !err) {
        perr(c, "fault needs call= and error=");
        return 0;
    }
    scopy(f.call, sizeof f.call, call);
    long long ev;
    if (parse_ll(err, &ev))
        f.error = (int)ev;
    else if (!error_from_name(err, &f.error)) {
        perr(c, "unknown error '%s'", err);
        return 0;
    }
    char mode[16] = "always";
    take_s(r, "mode", mode, sizeof mode);
    if (strcmp(mode, "once") != 0 && strcmp(mode, "always") != 0) {
        perr(c, "fault mode must be 'once' or 'always'");
        return 0;
    }
    f.once = strcmp(mode, "once") == 0;
    long long skip = 0;
    if (!take_ll(r, c, "skip", &skip, 0) || !take_i(r, c, "gpu", &f.gpu, 0))
        return 0;
    f.skip = skip < 0 ? 0 : (long)skip;
    keep_extra(r, f.extra, c);
    st->faults[st->nfaults++] = f;
    return 1;
}

typedef int (*rec_handler_t)(sim_state_t *, rec_t *, const pctx_t *);

/* Handled in this order, so a file may list records in any order. */
static const struct {
    const char *type;
    rec_handler_t fn;
} k_records[] = {
    {"system", on_system}, {"gpu", on_gpu}, {"giprofile", on_giprofile}, {"placement", on_placement},
    {"gi", on_gi},         {"ci", on_ci},   {"process", on_process},     {"fault", on_fault},
};
#define NREC_TYPES (sizeof k_records / sizeof k_records[0])

static int validate_gpus(sim_state_t *st, const char *path)
{
    unsigned n = 0;
    while (n < MAX_GPUS && st->gpus[n].present)
        n++;
    for (unsigned i = n; i < MAX_GPUS; i++) {
        if (st->gpus[i].present) {
            warnx_("%s: gpu indices must be 0..N-1 without gaps (gpu %u present, %u missing)", path, i, n);
            return 0;
        }
    }
    st->ngpus = n;
    return 1;
}

/* Parse the state text read from f (to EOF; f is closed).  path names the
 * source in messages.  NVML_ERROR_UNKNOWN on any syntax error, after printing
 * the offending line. */
static nvmlReturn_t parse_state_stream(FILE *f, const char *path, sim_state_t *st)
{
    rec_t *recs = NULL;
    size_t nrecs = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    int lineno = 0, ok = 1, have_system = 0;
    pctx_t ctx = {path, 0, NULL};

    while (ok && (len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        ctx.lineno = lineno;
        ctx.text = line;
        if (lineno == 1) {
            if (strcmp(line, STATE_HEADER) != 0) {
                perr(&ctx, "first line must be '%s'", STATE_HEADER);
                ok = 0;
            }
            continue;
        }
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        if (nrecs == cap) {
            cap = cap ? cap * 2 : 64;
            rec_t *n = realloc(recs, cap * sizeof *recs);
            if (!n) {
                ok = 0;
                break;
            }
            recs = n;
        }
        if (!rec_parse(&recs[nrecs], p, lineno, &ctx)) {
            rec_free(&recs[nrecs]);
            ok = 0;
            break;
        }
        nrecs++;
    }
    if (ok && ferror(f)) {
        /* a socket read that timed out: a truncated state must not pass */
        warnx_("%s: read error after line %d: %s", path, lineno, strerror(errno));
        ok = 0;
    }
    if (ok && lineno == 0) {
        warnx_("%s: empty state file", path);
        ok = 0;
    }
    free(line);
    fclose(f);

    /* every record type must be known before anything is interpreted */
    for (size_t i = 0; ok && i < nrecs; i++) {
        size_t t = 0;
        while (t < NREC_TYPES && strcmp(recs[i].type, k_records[t].type) != 0)
            t++;
        if (t == NREC_TYPES) {
            ctx.lineno = recs[i].lineno;
            ctx.text = recs[i].text;
            perr(&ctx, "unknown record type '%s'", recs[i].type);
            ok = 0;
        }
    }
    for (size_t t = 0; ok && t < NREC_TYPES; t++) {
        for (size_t i = 0; ok && i < nrecs; i++) {
            if (strcmp(recs[i].type, k_records[t].type) != 0)
                continue;
            ctx.lineno = recs[i].lineno;
            ctx.text = recs[i].text;
            if (t == 0 && have_system++) {
                perr(&ctx, "more than one system record");
                ok = 0;
                break;
            }
            ok = k_records[t].fn(st, &recs[i], &ctx);
        }
        if (ok && t == 1)
            ok = validate_gpus(st, path);
    }
    if (ok && !have_system) {
        warnx_("%s: no system record", path);
        ok = 0;
    }
    for (size_t i = 0; i < nrecs; i++)
        rec_free(&recs[i]);
    free(recs);
    return ok ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

/* Read and parse the state file at path.  NVML_ERROR_DRIVER_NOT_LOADED when
 * it does not exist (a node whose driver was never installed). */
static nvmlReturn_t parse_state_file(const char *path, sim_state_t *st)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        warnx_("cannot open state file %s: %s (set NVML_SIM_STATE)", path, strerror(errno));
        return errno == ENOENT ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_ERROR_UNKNOWN;
    }
    return parse_state_stream(f, path, st);
}

/* A connected stream to the first state socket that answers, or NULL.
 * NVML_SIM_SOCKET replaces the default list (a test's own socket). */
static FILE *connect_state_socket(char *used, size_t size)
{
    const char *env = getenv("NVML_SIM_SOCKET");
    const char *paths[2] = {DEFAULT_SOCKET, LEGACY_SOCKET};
    size_t n = 2;
    if (env && *env) {
        paths[0] = env;
        n = 1;
    }
    for (size_t i = 0; i < n; i++) {
        struct sockaddr_un addr;
        memset(&addr, 0, sizeof addr);
        addr.sun_family = AF_UNIX;
        if (strlen(paths[i]) >= sizeof addr.sun_path)
            continue;
        scopy(addr.sun_path, sizeof addr.sun_path, paths[i]);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return NULL;
        /* a hung server must not hang nvmlInit */
        struct timeval tv = {SOCKET_TIMEOUT_S, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(fd, (const struct sockaddr *)&addr, sizeof addr) != 0) {
            close(fd);
            continue;
        }
        shutdown(fd, SHUT_WR);
        FILE *f = fdopen(fd, "r");
        if (!f) {
            close(fd);
            return NULL;
        }
        scopy(used, size, paths[i]);
        return f;
    }
    return NULL;
}

/* ---- what a container reaches ------------------------------------------ */

/* The real driver's static capability table (/proc/driver/nvidia-caps/
 * mig-minors): config 1, monitor 2, then per GPU device minor 15 GPU
 * instance ids of 1 + 8 compute instance ids each. The driver facade of the
 * test ground (extensions/molecule/_shared/sim-driver.py) numbers the
 * /dev/nvidia-caps nodes the same way. */
static unsigned gi_cap_minor(unsigned gpu_minor, unsigned gi) { return 3 + gpu_minor * 135 + gi * 9; }
static unsigned ci_cap_minor(unsigned gpu_minor, unsigned gi, unsigned ci)
{
    return gi_cap_minor(gpu_minor, gi) + 1 + ci;
}

/* /dev/nvidia<n> (cap == 0) or /dev/nvidia-caps/nvidia-cap<n> (cap == 1) */
static int dev_node_exists(int cap, unsigned n)
{
    const char *root = getenv("NVML_SIM_DEV_ROOT");
    char path[PATH_MAX];
    if (cap)
        snprintf(path, sizeof path, "%s/dev/nvidia-caps/nvidia-cap%u", root ? root : "", n);
    else
        snprintf(path, sizeof path, "%s/dev/nvidia%u", root ? root : "", n);
    return access(path, F_OK) == 0;
}

/* As the driver shows a container only what its device nodes open: a GPU
 * whose /dev/nvidia<minor> the container lacks is not enumerated (the rest
 * are numbered from 0 in order, as NVML numbers what it can see), and a MIG
 * device without both of its /dev/nvidia-caps nodes is not either. CDI is
 * what puts those nodes there, so this is how a spec that lacks a device
 * shows inside the container. NVML_SIM_DEV_ROOT prefixes /dev (tests). */
static void restrict_to_reachable(sim_state_t *st)
{
    int newindex[MAX_GPUS];
    unsigned kept = 0;
    for (unsigned i = 0; i < st->ngpus; i++) {
        sim_gpu_t *g = &st->gpus[i];
        if (!dev_node_exists(0, g->minor)) {
            newindex[i] = -1;
            continue;
        }
        for (unsigned gi = 0; gi < MAX_GI_IDS; gi++) {
            if (!g->gis[gi].present)
                continue;
            int gi_seen = dev_node_exists(1, gi_cap_minor(g->minor, gi));
            for (unsigned ci = 0; ci < MAX_CI_IDS; ci++) {
                if (g->cis[gi][ci].present &&
                    !(gi_seen && dev_node_exists(1, ci_cap_minor(g->minor, gi, ci))))
                    g->cis[gi][ci].present = 0;
            }
            if (!gi_seen)
                g->gis[gi].present = 0;
        }
        newindex[i] = (int)kept;
        if (kept != i)
            st->gpus[kept] = *g;
        kept++;
    }
    st->ngpus = kept;
    unsigned procs = 0;
    for (unsigned p = 0; p < st->nprocs; p++) {
        if (newindex[st->procs[p].gpu] < 0)
            continue;
        st->procs[procs] = st->procs[p];
        st->procs[procs].gpu = (unsigned)newindex[st->procs[p].gpu];
        procs++;
    }
    st->nprocs = procs;
    for (unsigned f = 0; f < st->nfaults; f++) {
        if (st->faults[f].gpu >= 0 && (unsigned)st->faults[f].gpu < MAX_GPUS)
            st->faults[f].gpu = newindex[st->faults[f].gpu];
    }
}

/* No state file: inside a container, the host's state as its stand-in
 * nvidia-persistenced serves it (the whole text, then EOF).  Nothing to
 * connect to, or an empty answer (the host has no state either), is a node
 * without a driver. */
static nvmlReturn_t parse_state_socket(sim_state_t *st)
{
    char sock[PATH_MAX] = "";
    FILE *f = connect_state_socket(sock, sizeof sock);
    if (!f) {
        const char *env = getenv("NVML_SIM_SOCKET");
        warnx_("no state file %s and no state socket %s (set NVML_SIM_STATE or NVML_SIM_SOCKET)", st->path,
               (env && *env) ? env : DEFAULT_SOCKET " or " LEGACY_SOCKET);
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    int c = getc(f);
    if (c == EOF) {
        warnx_("state socket %s sent no state%s", sock, ferror(f) ? " (read error or timeout)" : "");
        fclose(f);
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    ungetc(c, f);
    st->snapshot = 1;
    nvmlReturn_t rc = parse_state_stream(f, sock, st);
    if (rc == NVML_SUCCESS)
        restrict_to_reachable(st);
    return rc;
}

/* ---- writing ------------------------------------------------------------- */

static void put_kv(FILE *f, const char *key, const char *val)
{
    fprintf(f, " %s=", key);
    pct_encode(f, val);
}

static void put_extra(FILE *f, const char *extra)
{
    if (extra[0])
        fprintf(f, " %s", extra);
}

static void write_gpu(FILE *f, const sim_state_t *st, unsigned i)
{
    const sim_gpu_t *g = &st->gpus[i];
    fprintf(f, "gpu index=%u", i);
    put_kv(f, "name", g->name);
    put_kv(f, "uuid", g->uuid);
    put_kv(f, "serial", g->serial);
    put_kv(f, "board_part_number", g->part);
    put_kv(f, "bus_id", g->bus_id);
    fprintf(f, " pci_domain=%u pci_bus=%u pci_device=%u pci_device_id=0x%08X pci_subsystem_id=0x%08X minor=%u",
            g->pci_domain, g->pci_bus, g->pci_device, g->pci_device_id, g->pci_subsystem_id, g->minor);
    fprintf(f, " memory_total=%llu memory_reserved=%llu arch=%u cc_major=%d cc_minor=%d sm_count=%u",
            g->memory_total, g->memory_reserved, g->arch, g->cc_major, g->cc_minor, g->sm_count);
    fprintf(f, " persistence=%u mig_capable=%u mig_current=%u mig_pending=%u mig_toggle=%s", g->persistence,
            g->mig_capable, g->mig_current, g->mig_pending, g->mig_toggle_reboot ? "reboot" : "immediate");
    put_extra(f, g->extra);
    fputc('\n', f);

    for (unsigned p = 0; p < g->nprofiles; p++) {
        const sim_profile_t *pr = &g->profiles[p];
        fprintf(f, "giprofile gpu=%u index=%u id=%u", i, pr->index, pr->id);
        put_kv(f, "name", pr->name);
        fprintf(f, " slices=%u instances=%u sm=%u memory_mb=%llu ce=%u dec=%u enc=%u jpeg=%u ofa=%u p2p=%u",
                pr->slices, pr->instances, pr->sm, pr->memory_mb, pr->ce, pr->dec, pr->enc, pr->jpeg, pr->ofa,
                pr->p2p);
        if (pr->ci_slices_mask) {
            const char *sep = " ci_slices=";
            for (unsigned s = 1; s <= 30; s++) {
                if (pr->ci_slices_mask & (1u << s)) {
                    fprintf(f, "%s%u", sep, s);
                    sep = ",";
                }
            }
        }
        put_extra(f, pr->extra);
        fputc('\n', f);
        for (unsigned k = 0; k < pr->nplacements; k++)
            fprintf(f, "placement gpu=%u profile=%u start=%u size=%u\n", i, pr->id, pr->placements[k].start,
                    pr->placements[k].size);
    }
    for (unsigned id = 0; id < MAX_GI_IDS; id++) {
        const sim_gi_t *gi = &g->gis[id];
        if (!gi->present)
            continue;
        fprintf(f, "gi gpu=%u id=%u profile=%u start=%u size=%u", i, id, gi->profile_id, gi->span.start,
                gi->span.size);
        put_extra(f, gi->extra);
        fputc('\n', f);
        for (unsigned c = 0; c < MAX_CI_IDS; c++) {
            const sim_ci_t *ci = &g->cis[id][c];
            if (!ci->present)
                continue;
            fprintf(f, "ci gpu=%u gi=%u id=%u profile=%u start=%u size=%u", i, id, c, ci->profile, ci->span.start,
                    ci->span.size);
            put_kv(f, "uuid", ci->uuid);
            put_extra(f, ci->extra);
            fputc('\n', f);
        }
    }
}

static void write_state_to(FILE *f, const sim_state_t *st)
{
    fprintf(f, "%s\n# written by the nvml-sim libnvidia-ml.so.1; see tests/nvml-sim/FORMAT.md\n", STATE_HEADER);
    fprintf(f, "system");
    put_kv(f, "driver_version", st->sys.driver_version);
    fprintf(f, " cuda_driver_version=%d", st->sys.cuda_driver_version);
    put_kv(f, "nvml_version", st->sys.nvml_version);
    fprintf(f, " driver_loaded=%d libcuda=%d", st->sys.driver_loaded, st->sys.libcuda);
    put_extra(f, st->sys.extra);
    fputc('\n', f);
    for (unsigned i = 0; i < st->ngpus; i++)
        write_gpu(f, st, i);
    for (unsigned i = 0; i < st->nprocs; i++) {
        const sim_proc_t *p = &st->procs[i];
        fprintf(f, "process gpu=%u pid=%u used_memory=%llu gi=%d ci=%d", p->gpu, p->pid, p->used_memory, p->gi,
                p->ci);
        put_kv(f, "name", p->name);
        put_extra(f, p->extra);
        fputc('\n', f);
    }
    for (unsigned i = 0; i < st->nfaults; i++) {
        const sim_fault_t *x = &st->faults[i];
        fprintf(f, "fault");
        put_kv(f, "call", x->call);
        fprintf(f, " error=%d mode=%s skip=%ld gpu=%d", x->error, x->once ? "once" : "always", x->skip, x->gpu);
        put_extra(f, x->extra);
        fputc('\n', f);
    }
}

static void fsync_parent_dir(const char *path)
{
    char dir[PATH_MAX];
    scopy(dir, sizeof dir, path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        scopy(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* write <path>.tmp, fsync, rename; the caller holds the lock */
static int write_state_locked(const sim_state_t *st)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", st->path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        warnx_("cannot write %s: %s", tmp, strerror(errno));
        return 0;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return 0;
    }
    write_state_to(f, st);
    int ok = fflush(f) == 0 && fsync(fd) == 0;
    ok = (fclose(f) == 0) && ok;
    if (ok && rename(tmp, st->path) != 0)
        ok = 0;
    if (!ok) {
        warnx_("cannot update %s: %s", st->path, strerror(errno));
        unlink(tmp);
        return 0;
    }
    fsync_parent_dir(st->path);
    return 1;
}

static void save_state(const sim_state_t *st)
{
    if (st->snapshot)
        return; /* fired faults count for this session only */
    int fd = lock_state(st->path);
    write_state_locked(st);
    unlock_state(fd);
}

/* ---- boot -------------------------------------------------------------- */

/* A reboot: pending MIG modes take effect; GPU/compute instances and client
 * processes do not survive it. */
static void apply_boot(sim_state_t *st)
{
    for (unsigned i = 0; i < st->ngpus; i++) {
        sim_gpu_t *g = &st->gpus[i];
        g->mig_current = g->mig_pending;
        memset(g->gis, 0, sizeof g->gis);
        memset(g->cis, 0, sizeof g->cis);
    }
    st->nprocs = 0;
}

static int mkdir_p(const char *dir)
{
    char buf[PATH_MAX];
    scopy(buf, sizeof buf, dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return 0;
            *p = '/';
        }
    }
    return mkdir(buf, 0755) == 0 || errno == EEXIST;
}

/* Called with the state lock held, right after parsing. */
static void boot_if_needed(sim_state_t *st)
{
    char marker[PATH_MAX + 16];
    snprintf(marker, sizeof marker, "%s/booted", run_dir());
    if (access(marker, F_OK) == 0)
        return;
    apply_boot(st);
    write_state_locked(st);
    int fd = -1;
    if (mkdir_p(run_dir()))
        fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        warnx_("cannot create boot marker %s: %s", marker, strerror(errno));
    else
        close(fd);
}

/* Load the whole state; with boot != 0 also apply a pending boot. */
static nvmlReturn_t load_state(sim_state_t **out, int boot)
{
    sim_state_t *st = calloc(1, sizeof *st);
    if (!st)
        return NVML_ERROR_MEMORY;
    scopy(st->path, sizeof st->path, state_path());
    nvmlReturn_t rc;
    /* access, not stat: stat is GLIBC_2.33, above the library's ceiling */
    if (access(st->path, F_OK) != 0 && errno == ENOENT) {
        rc = parse_state_socket(st); /* served booted: no boot, no run dir */
    } else {
        int fd = lock_state(st->path);
        rc = parse_state_file(st->path, st);
        if (rc == NVML_SUCCESS && boot)
            boot_if_needed(st);
        unlock_state(fd);
    }
    if (rc != NVML_SUCCESS) {
        free(st);
        return rc;
    }
    *out = st;
    return NVML_SUCCESS;
}

/* ======================================================================== */
/* 4. fault injection                                                       */
/* ======================================================================== */

static int fault_matches(const sim_fault_t *f, const char *call, int gpu)
{
    int name_ok = strcmp(f->call, call) == 0 ||
                  (strcmp(f->call, "nvmlInit") == 0 && strncmp(call, "nvmlInit", 8) == 0);
    return name_ok && (f->gpu == -1 || f->gpu == gpu);
}

/* The first matching fault record decides: while it still has skips left the
 * call passes (and the skip count drops); then it returns its error, and a
 * 'once' record is removed.  Every change is written back at once. */
static nvmlReturn_t fault_check(sim_state_t *st, const char *call, int gpu)
{
    for (unsigned i = 0; i < st->nfaults; i++) {
        sim_fault_t *f = &st->faults[i];
        if (!fault_matches(f, call, gpu))
            continue;
        if (f->skip > 0) {
            f->skip--;
            save_state(st);
            return NVML_SUCCESS;
        }
        nvmlReturn_t err = (nvmlReturn_t)f->error;
        if (f->once) {
            memmove(&st->faults[i], &st->faults[i + 1], (st->nfaults - i - 1) * sizeof *f);
            st->nfaults--;
            save_state(st);
        }
        return err;
    }
    return NVML_SUCCESS;
}

/* ======================================================================== */
/* 5. handles and argument resolution                                       */
/* ======================================================================== */

static void init_handles(void)
{
    if (g_handles_ready)
        return;
    for (unsigned g = 0; g < MAX_GPUS; g++) {
        g_dev[g].gpu = g;
        for (unsigned i = 0; i < MAX_GI_IDS; i++) {
            g_gih[g][i].gpu = g;
            g_gih[g][i].gi = i;
            for (unsigned c = 0; c < MAX_CI_IDS; c++) {
                struct nvmlDevice_st *m = &g_migdev[g][i][c];
                m->gpu = g;
                m->mig = 1;
                m->gi = i;
                m->ci = c;
                g_cih[g][i][c].gpu = g;
                g_cih[g][i][c].gi = i;
                g_cih[g][i][c].ci = c;
            }
        }
    }
    g_handles_ready = 1;
}

/* Is p the address of an element of the table at base?  Compared as integers
 * so that foreign pointers are never dereferenced. */
static int in_table(const void *p, const void *base, size_t elem, size_t count)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;
    return a >= b && a < b + elem * count && (a - b) % elem == 0;
}

static const struct nvmlDevice_st *as_device(nvmlDevice_t d)
{
    if (in_table(d, g_dev, sizeof g_dev[0], MAX_GPUS) ||
        in_table(d, g_migdev, sizeof g_migdev[0][0][0], (size_t)MAX_GPUS * MAX_GI_IDS * MAX_CI_IDS))
        return d;
    return NULL;
}

static const struct nvmlGpuInstance_st *as_gi(nvmlGpuInstance_t h)
{
    return in_table(h, g_gih, sizeof g_gih[0][0], (size_t)MAX_GPUS * MAX_GI_IDS) ? h : NULL;
}

static const struct nvmlComputeInstance_st *as_ci(nvmlComputeInstance_t h)
{
    return in_table(h, g_cih, sizeof g_cih[0][0][0], (size_t)MAX_GPUS * MAX_GI_IDS * MAX_CI_IDS) ? h : NULL;
}

/* A resolved device argument. */
typedef struct {
    sim_gpu_t *gpu;
    unsigned index; /* physical GPU index */
    int mig;        /* handle is a MIG device */
    unsigned gi, ci;
} devref_t;

static int gi_live(const sim_gpu_t *g, unsigned gi)
{
    return g->mig_current && gi < MAX_GI_IDS && g->gis[gi].present;
}

static int ci_live(const sim_gpu_t *g, unsigned gi, unsigned ci)
{
    return gi_live(g, gi) && ci < MAX_CI_IDS && g->cis[gi][ci].present;
}

enum { DEV_ANY = 0, DEV_PHYSICAL = 1 };

/* Common prologue of device calls: initialised?  injected fault?  valid
 * handle?  (in that order; the fault filter needs the GPU index). */
static nvmlReturn_t enter_device(const char *call, nvmlDevice_t device, int want, devref_t *out)
{
    if (!g_state)
        return NVML_ERROR_UNINITIALIZED;
    const struct nvmlDevice_st *d = as_device(device);
    int gpu_index = d && d->gpu < g_state->ngpus ? (int)d->gpu : -1;
    nvmlReturn_t rc = fault_check(g_state, call, gpu_index);
    if (rc != NVML_SUCCESS)
        return rc;
    if (gpu_index < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    sim_gpu_t *g = &g_state->gpus[gpu_index];
    /* a GPU that fell off the bus answers nothing, through any handle */
    if (g->health.lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (d->mig && (want == DEV_PHYSICAL || !ci_live(g, d->gi, d->ci)))
        return NVML_ERROR_INVALID_ARGUMENT;
    out->gpu = g;
    out->index = (unsigned)gpu_index;
    out->mig = d->mig;
    out->gi = d->gi;
    out->ci = d->ci;
    return NVML_SUCCESS;
}

typedef struct {
    sim_gpu_t *gpu;
    unsigned index;
    unsigned gi;
    unsigned ci;
} instref_t;

static nvmlReturn_t enter_gi(const char *call, nvmlGpuInstance_t h, instref_t *out)
{
    if (!g_state)
        return NVML_ERROR_UNINITIALIZED;
    const struct nvmlGpuInstance_st *p = as_gi(h);
    int gpu_index = p && p->gpu < g_state->ngpus ? (int)p->gpu : -1;
    nvmlReturn_t rc = fault_check(g_state, call, gpu_index);
    if (rc != NVML_SUCCESS)
        return rc;
    if (gpu_index >= 0 && g_state->gpus[gpu_index].health.lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (gpu_index < 0 || !gi_live(&g_state->gpus[gpu_index], p->gi))
        return NVML_ERROR_INVALID_ARGUMENT;
    out->gpu = &g_state->gpus[gpu_index];
    out->index = (unsigned)gpu_index;
    out->gi = p->gi;
    out->ci = 0;
    return NVML_SUCCESS;
}

static nvmlReturn_t enter_ci(const char *call, nvmlComputeInstance_t h, instref_t *out)
{
    if (!g_state)
        return NVML_ERROR_UNINITIALIZED;
    const struct nvmlComputeInstance_st *p = as_ci(h);
    int gpu_index = p && p->gpu < g_state->ngpus ? (int)p->gpu : -1;
    nvmlReturn_t rc = fault_check(g_state, call, gpu_index);
    if (rc != NVML_SUCCESS)
        return rc;
    if (gpu_index >= 0 && g_state->gpus[gpu_index].health.lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (gpu_index < 0 || !ci_live(&g_state->gpus[gpu_index], p->gi, p->ci))
        return NVML_ERROR_INVALID_ARGUMENT;
    out->gpu = &g_state->gpus[gpu_index];
    out->index = (unsigned)gpu_index;
    out->gi = p->gi;
    out->ci = p->ci;
    return NVML_SUCCESS;
}

/* Calls that take no device argument: only gpu=-1 faults can match, except
 * where a caller passes the GPU index it is about to touch. */
static nvmlReturn_t enter_plain(const char *call, int gpu_index)
{
    if (!g_state)
        return NVML_ERROR_UNINITIALIZED;
    return fault_check(g_state, call, gpu_index);
}

static int privileged(void)
{
    return g_euid == 0;
}

/* Calls that change the node: root, and a state this process may write. */
static int may_change(void)
{
    return privileged() && !g_state->snapshot;
}

static nvmlDevice_t dev_handle(unsigned gpu)
{
    return &g_dev[gpu];
}

/* ======================================================================== */
/* 6. MIG geometry                                                          */
/* ======================================================================== */

static int spans_overlap(span_t a, span_t b)
{
    return a.start < b.start + b.size && b.start < a.start + a.size;
}

/* Placement units of the GPU's memory-slice grid (8 on A100/H100). */
static unsigned grid_units(const sim_gpu_t *g)
{
    unsigned u = 0;
    for (unsigned i = 0; i < g->nprofiles; i++)
        for (unsigned k = 0; k < g->profiles[i].nplacements; k++) {
            const span_t *s = &g->profiles[i].placements[k];
            if (s->start + s->size > u)
                u = s->start + s->size;
        }
    return u;
}

/* Compute slices of the whole GPU (7 on A100/H100): the widest profile. */
static unsigned gpu_compute_slices(const sim_gpu_t *g)
{
    unsigned n = 0;
    for (unsigned i = 0; i < g->nprofiles; i++)
        if (g->profiles[i].slices > n)
            n = g->profiles[i].slices;
    return n;
}

/* GPU-instance id of a placement: sizes in descending order each own a block
 * of ceil(U/size) consecutive ids, assigned by start.  On an 8-unit A100:
 * 7g -> 0, size-4 -> 1..2, size-2 -> 3..6, size-1 -> 7..14. */
static int gi_id_for(const sim_gpu_t *g, span_t s, unsigned *id)
{
    unsigned units = grid_units(g);
    unsigned base = 0;
    for (unsigned size = units; size > s.size; size--) {
        int used = 0;
        for (unsigned i = 0; i < g->nprofiles && !used; i++)
            for (unsigned k = 0; k < g->profiles[i].nplacements; k++)
                if (g->profiles[i].placements[k].size == size)
                    used = 1;
        if (used)
            base += (units + size - 1) / size;
    }
    unsigned v = base + s.start / s.size;
    if (v >= MAX_GI_IDS)
        return 0;
    *id = v;
    return 1;
}

static int profile_has_placement(const sim_profile_t *p, span_t s)
{
    for (unsigned k = 0; k < p->nplacements; k++)
        if (p->placements[k].start == s.start && p->placements[k].size == s.size)
            return 1;
    return 0;
}

/* Occupancy of a GPU's memory slices, copied so capacity can be simulated. */
typedef struct {
    unsigned n;
    span_t span[MAX_GI_IDS];
    unsigned profile_id[MAX_GI_IDS];
    unsigned compute_used;
} gi_layout_t;

static void gi_layout_add(gi_layout_t *l, const sim_profile_t *p, span_t s)
{
    l->span[l->n] = s;
    l->profile_id[l->n] = p->id;
    l->n++;
    l->compute_used += p->slices;
}

static void gi_layout_of(sim_gpu_t *g, gi_layout_t *l)
{
    memset(l, 0, sizeof *l);
    for (unsigned id = 0; id < MAX_GI_IDS; id++) {
        if (!g->gis[id].present)
            continue;
        const sim_profile_t *p = profile_by_id(g, g->gis[id].profile_id);
        if (p)
            gi_layout_add(l, p, g->gis[id].span);
    }
}

/* Can profile p be placed at s?  INVALID_ARGUMENT when s is not one of the
 * profile's placements; INSUFFICIENT_RESOURCES when the instance limit, the
 * compute slices or an overlap with an existing instance forbid it. */
static nvmlReturn_t gi_layout_check(const sim_gpu_t *g, const gi_layout_t *l, const sim_profile_t *p, span_t s)
{
    if (!profile_has_placement(p, s))
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned same = 0;
    for (unsigned i = 0; i < l->n; i++) {
        if (l->profile_id[i] == p->id)
            same++;
        if (spans_overlap(l->span[i], s))
            return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    if (same >= p->instances || l->compute_used + p->slices > gpu_compute_slices(g) || l->n >= MAX_GI_IDS)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    return NVML_SUCCESS;
}

/* Automatic placement: the free placement with the highest start.  This
 * reproduces the MIG user guide's A100 example, where creating 19,19,14,9
 * fails at 9 while 9,19,14,19 succeeds. */
static int gi_layout_pick(const sim_gpu_t *g, const gi_layout_t *l, const sim_profile_t *p, span_t *out)
{
    int best = -1;
    for (unsigned k = 0; k < p->nplacements; k++) {
        if (gi_layout_check(g, l, p, p->placements[k]) != NVML_SUCCESS)
            continue;
        if (best < 0 || p->placements[k].start > p->placements[best].start)
            best = (int)k;
    }
    if (best < 0)
        return 0;
    *out = p->placements[best];
    return 1;
}

/* ---- compute instances ---------------------------------------------------- */

typedef struct {
    unsigned index;
    unsigned slices;
    unsigned instances;
} ci_profile_t;

/* Compute-instance profiles are derived from the GI profile (FORMAT.md):
 * every NVML_COMPUTE_INSTANCE_PROFILE_* of s <= C slices, instanceCount C/s,
 * placements at multiples of s; 'ci_slices' on the giprofile narrows the set
 * to what the hardware lists (e.g. no 6c on a 7g GI). */
static int ci_profile_get(const sim_profile_t *gp, unsigned index, ci_profile_t *out)
{
    if (index >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
        return 0;
    unsigned s = k_ci_slices[index];
    if (s == 0 || s > gp->slices)
        return 0;
    if (gp->ci_slices_mask && !(gp->ci_slices_mask & (1u << s)))
        return 0;
    out->index = index;
    out->slices = s;
    out->instances = gp->slices / s;
    return 1;
}

/* "1c.3g.20gb" for a partial CI; the full-size CI carries the GI's name. */
static void ci_profile_name(const sim_profile_t *gp, const ci_profile_t *cp, char *out, size_t size)
{
    char buf[sizeof gp->name + 16];
    if (cp->slices == gp->slices)
        snprintf(buf, sizeof buf, "%s", gp->name);
    else
        snprintf(buf, sizeof buf, "%uc.%s", cp->slices, gp->name);
    scopy(out, size, buf);
}

static nvmlReturn_t ci_check(const sim_gpu_t *g, unsigned gi, const ci_profile_t *cp, span_t s)
{
    if (s.size != cp->slices || s.start % cp->slices != 0 || s.start + s.size > cp->instances * cp->slices)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned same = 0, n = 0;
    for (unsigned c = 0; c < MAX_CI_IDS; c++) {
        const sim_ci_t *ci = &g->cis[gi][c];
        if (!ci->present)
            continue;
        n++;
        if (ci->profile == cp->index)
            same++;
        if (spans_overlap(ci->span, s))
            return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    if (same >= cp->instances || n >= MAX_CI_IDS)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    return NVML_SUCCESS;
}

/* Automatic CI placement: the lowest free start. */
static int ci_pick(const sim_gpu_t *g, unsigned gi, const ci_profile_t *cp, span_t *out)
{
    for (unsigned k = 0; k < cp->instances; k++) {
        span_t s = {k * cp->slices, cp->slices};
        if (ci_check(g, gi, cp, s) == NVML_SUCCESS) {
            *out = s;
            return 1;
        }
    }
    return 0;
}

static unsigned procs_on(const sim_state_t *st, unsigned gpu, int gi, int ci)
{
    unsigned n = 0;
    for (unsigned i = 0; i < st->nprocs; i++) {
        const sim_proc_t *p = &st->procs[i];
        if (p->gpu == gpu && (gi < 0 || p->gi == gi) && (ci < 0 || p->ci == ci))
            n++;
    }
    return n;
}

/* MIG devices of a GPU in (GI id, CI id) order; their position is the index
 * used by nvmlDeviceGetMigDeviceHandleByIndex / nvmlDeviceGetIndex. */
static int mig_device_at(const sim_gpu_t *g, unsigned index, unsigned *gi, unsigned *ci)
{
    unsigned n = 0;
    for (unsigned i = 0; i < MAX_GI_IDS; i++)
        for (unsigned c = 0; c < MAX_CI_IDS; c++)
            if (ci_live(g, i, c) && n++ == index) {
                *gi = i;
                *ci = c;
                return 1;
            }
    return 0;
}

static unsigned mig_device_index(const sim_gpu_t *g, unsigned gi, unsigned ci)
{
    unsigned n = 0;
    for (unsigned i = 0; i < MAX_GI_IDS; i++)
        for (unsigned c = 0; c < MAX_CI_IDS; c++)
            if (ci_live(g, i, c)) {
                if (i == gi && c == ci)
                    return n;
                n++;
            }
    return n;
}

static const sim_profile_t *gi_profile(sim_gpu_t *g, unsigned gi)
{
    return profile_by_id(g, g->gis[gi].profile_id);
}

static void mig_device_name(sim_gpu_t *g, unsigned gi, unsigned ci, char *out, size_t size)
{
    const sim_profile_t *gp = gi_profile(g, gi);
    ci_profile_t cp = {0, 0, 0};
    char pname[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
    if (gp && ci_profile_get(gp, g->cis[gi][ci].profile, &cp))
        ci_profile_name(gp, &cp, pname, sizeof pname);
    else if (gp)
        snprintf(pname, sizeof pname, "%s", gp->name);
    snprintf(out, size, "%s MIG %s", g->name, pname);
}

/* ======================================================================== */
/* 7. API implementations (global lock held)                                */
/* ======================================================================== */

static uid_t effective_uid(void)
{
    const char *e = getenv("NVML_SIM_EUID");
    long long v;
    if (e && *e && parse_ll(e, &v) && v >= 0)
        return (uid_t)v;
    return geteuid();
}

static nvmlReturn_t do_init(const char *call, unsigned int flags)
{
    if (g_state) {
        nvmlReturn_t rc = fault_check(g_state, call, -1);
        if (rc == NVML_SUCCESS)
            g_refcount++;
        return rc;
    }
    sim_state_t *st = NULL;
    nvmlReturn_t rc = load_state(&st, 1);
    if (rc != NVML_SUCCESS)
        return rc;
    rc = fault_check(st, call, -1);
    if (rc == NVML_SUCCESS && !st->sys.driver_loaded)
        rc = NVML_ERROR_DRIVER_NOT_LOADED;
    if (rc == NVML_SUCCESS && st->ngpus == 0 && !(flags & NVML_INIT_FLAG_NO_GPUS))
        rc = NVML_ERROR_GPU_NOT_FOUND;
    if (rc != NVML_SUCCESS) {
        free(st);
        return rc;
    }
    init_handles();
    g_euid = effective_uid();
    g_state = st;
    g_refcount = 1;
    return NVML_SUCCESS;
}

/* Like the real library, a surplus nvmlShutdown is not an error. */
static nvmlReturn_t do_shutdown(void)
{
    if (!g_state)
        return NVML_SUCCESS;
    nvmlReturn_t rc = fault_check(g_state, "nvmlShutdown", -1);
    if (rc != NVML_SUCCESS)
        return rc;
    if (--g_refcount == 0) {
        free(g_state);
        g_state = NULL;
    }
    return NVML_SUCCESS;
}

static const char *error_string(nvmlReturn_t r)
{
    for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++)
        if (k_errors[i].code == r)
            return k_errors[i].text;
    return "Unknown Error";
}

/* ---- system ---------------------------------------------------------------- */

static nvmlReturn_t system_driver_version(char *version, unsigned int length)
{
    nvmlReturn_t rc = enter_plain("nvmlSystemGetDriverVersion", -1);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!version)
        return NVML_ERROR_INVALID_ARGUMENT;
    return copy_out(version, length, g_state->sys.driver_version);
}

/* nvmlSystemGetNVMLVersion is the library's own version: like the real
 * library it answers before nvmlInit too, from a read-only look at the state. */
typedef nvmlReturn_t (*sys_query_t)(sim_state_t *st, void *arg, unsigned int length);

static nvmlReturn_t with_system(const char *call, sys_query_t fn, void *arg, unsigned int length)
{
    sim_state_t *st = g_state;
    sim_state_t *tmp = NULL;
    if (!st) {
        nvmlReturn_t rc = load_state(&tmp, 0);
        if (rc != NVML_SUCCESS)
            return NVML_ERROR_UNINITIALIZED;
        st = tmp;
    }
    nvmlReturn_t rc = fault_check(st, call, -1);
    if (rc == NVML_SUCCESS)
        rc = fn(st, arg, length);
    free(tmp);
    return rc;
}

static nvmlReturn_t q_nvml_version(sim_state_t *st, void *arg, unsigned int length)
{
    if (!arg)
        return NVML_ERROR_INVALID_ARGUMENT;
    return copy_out(arg, length, st->sys.nvml_version);
}

static nvmlReturn_t cuda_version(const char *call, int *version, int v2)
{
    nvmlReturn_t rc = enter_plain(call, -1);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!version)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (v2 && !g_state->sys.libcuda) /* _v2 asks libcuda.so.1 itself */
        return NVML_ERROR_LIBRARY_NOT_FOUND;
    *version = g_state->sys.cuda_driver_version;
    return NVML_SUCCESS;
}

/* ---- device discovery -------------------------------------------------------- */

static nvmlReturn_t device_count(const char *call, unsigned int *count)
{
    nvmlReturn_t rc = enter_plain(call, -1);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = g_state->ngpus;
    return NVML_SUCCESS;
}

static nvmlReturn_t handle_by_index(const char *call, unsigned int index, nvmlDevice_t *device)
{
    /* the index names the GPU, so per-GPU faults apply ("GPU 3 is lost") */
    int gpu = g_state && index < g_state->ngpus ? (int)index : -1;
    nvmlReturn_t rc = enter_plain(call, gpu);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!device || gpu < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g_state->gpus[gpu].health.lost)
        return NVML_ERROR_GPU_IS_LOST;
    *device = dev_handle(index);
    return NVML_SUCCESS;
}

static nvmlReturn_t handle_by_uuid(const char *uuid, nvmlDevice_t *device)
{
    int gpu = -1;
    nvmlDevice_t found = NULL;
    for (unsigned i = 0; g_state && uuid && i < g_state->ngpus && !found; i++) {
        sim_gpu_t *g = &g_state->gpus[i];
        if (strcmp(g->uuid, uuid) == 0) {
            found = dev_handle(i);
            gpu = (int)i;
        }
        for (unsigned gi = 0; gi < MAX_GI_IDS && !found; gi++)
            for (unsigned ci = 0; ci < MAX_CI_IDS && !found; ci++)
                if (ci_live(g, gi, ci) && strcmp(g->cis[gi][ci].uuid, uuid) == 0) {
                    found = &g_migdev[i][gi][ci];
                    gpu = (int)i;
                }
    }
    nvmlReturn_t rc = enter_plain("nvmlDeviceGetHandleByUUID", gpu);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strncmp(uuid, "GPU-", 4) != 0 && strncmp(uuid, "MIG-", 4) != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!found)
        return NVML_ERROR_NOT_FOUND;
    if (g_state->gpus[gpu].health.lost)
        return NVML_ERROR_GPU_IS_LOST;
    *device = found;
    return NVML_SUCCESS;
}

static nvmlReturn_t handle_by_bus_id(const char *call, const char *bus_id, nvmlDevice_t *device)
{
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    int parsed = bus_id && parse_bus_id(bus_id, &dom, &bus, &dev, &fn);
    int gpu = -1;
    for (unsigned i = 0; parsed && g_state && i < g_state->ngpus; i++) {
        const sim_gpu_t *g = &g_state->gpus[i];
        if (g->pci_domain == dom && g->pci_bus == bus && g->pci_device == dev && fn == 0)
            gpu = (int)i;
    }
    nvmlReturn_t rc = enter_plain(call, gpu);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!parsed || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gpu < 0)
        return NVML_ERROR_NOT_FOUND;
    if (g_state->gpus[gpu].health.lost)
        return NVML_ERROR_GPU_IS_LOST;
    *device = dev_handle((unsigned)gpu);
    return NVML_SUCCESS;
}

/* ---- device attributes ------------------------------------------------------- */

static nvmlReturn_t device_index(nvmlDevice_t device, unsigned int *index)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetIndex", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = d.mig ? mig_device_index(d.gpu, d.gi, d.ci) : d.index;
    return NVML_SUCCESS;
}

static nvmlReturn_t device_name(nvmlDevice_t device, char *name, unsigned int length)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetName", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!name)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.mig)
        return copy_out(name, length, d.gpu->name);
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE * 2 + 8]; /* "<gpu name> MIG <profile>" */
    mig_device_name(d.gpu, d.gi, d.ci, buf, sizeof buf);
    return copy_out(name, length, buf);
}

static nvmlReturn_t device_uuid(nvmlDevice_t device, char *uuid, unsigned int length)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetUUID", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!uuid)
        return NVML_ERROR_INVALID_ARGUMENT;
    return copy_out(uuid, length, d.mig ? d.gpu->cis[d.gi][d.ci].uuid : d.gpu->uuid);
}

/* Board-level strings: a MIG device reports its parent's board. */
static nvmlReturn_t device_serial(nvmlDevice_t device, char *serial, unsigned int length)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetSerial", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!serial)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.gpu->serial[0])
        return NVML_ERROR_NOT_SUPPORTED;
    return copy_out(serial, length, d.gpu->serial);
}

static nvmlReturn_t device_part(nvmlDevice_t device, char *part, unsigned int length)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetBoardPartNumber", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!part)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.gpu->part[0])
        return NVML_ERROR_NOT_SUPPORTED;
    return copy_out(part, length, d.gpu->part);
}

static nvmlReturn_t device_minor(nvmlDevice_t device, unsigned int *minor)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetMinorNumber", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (d.mig) /* MIG devices have no /dev/nvidiaN node of their own */
        return NVML_ERROR_NOT_SUPPORTED;
    *minor = d.gpu->minor;
    return NVML_SUCCESS;
}

/* nvmlDeviceGetPciInfo / _v2 predate busId[32]: they fill only the fields
 * every nvmlPciInfo_t revision shares (the first 36 bytes), so an old caller's
 * shorter struct is never overrun. */
static nvmlReturn_t device_pci(const char *call, nvmlDevice_t device, nvmlPciInfo_t *pci, int v3)
{
    devref_t d;
    nvmlReturn_t rc = enter_device(call, device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    const sim_gpu_t *g = d.gpu;
    char legacy[32];
    snprintf(legacy, sizeof legacy, "%04X:%02X:%02X.0", g->pci_domain & 0xFFFF, g->pci_bus, g->pci_device);
    memset(pci->busIdLegacy, 0, sizeof pci->busIdLegacy);
    scopy(pci->busIdLegacy, sizeof pci->busIdLegacy, legacy);
    pci->domain = g->pci_domain;
    pci->bus = g->pci_bus;
    pci->device = g->pci_device;
    pci->pciDeviceId = g->pci_device_id;
    pci->pciSubSystemId = g->pci_subsystem_id;
    if (v3) {
        memset(pci->busId, 0, sizeof pci->busId);
        snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", g->pci_domain, g->pci_bus, g->pci_device);
    }
    return NVML_SUCCESS;
}

/* Memory: physical GPU = total minus driver-reserved minus what processes
 * hold; a MIG device = its GPU instance's memory and that GI's processes. */
static void memory_of(const devref_t *d, unsigned long long *total, unsigned long long *reserved,
                      unsigned long long *allocated)
{
    unsigned long long used = 0;
    for (unsigned i = 0; i < g_state->nprocs; i++) {
        const sim_proc_t *p = &g_state->procs[i];
        if (p->gpu == d->index && (!d->mig || p->gi == (int)d->gi))
            used += p->used_memory;
    }
    if (d->mig) {
        const sim_profile_t *gp = gi_profile(d->gpu, d->gi);
        *total = gp ? gp->memory_mb << 20 : 0;
        *reserved = 0;
    } else {
        *total = d->gpu->memory_total;
        *reserved = d->gpu->memory_reserved;
    }
    if (*reserved > *total)
        *reserved = *total;
    if (used > *total - *reserved)
        used = *total - *reserved;
    *allocated = used;
}

static nvmlReturn_t device_memory(nvmlDevice_t device, nvmlMemory_t *memory)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetMemoryInfo", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long total, reserved, allocated;
    memory_of(&d, &total, &reserved, &allocated);
    memory->total = total;
    memory->used = reserved + allocated; /* v1 'used' counts the reserved part */
    memory->free = total - reserved - allocated;
    return NVML_SUCCESS;
}

static nvmlReturn_t device_memory_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetMemoryInfo_v2", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    unsigned long long total, reserved, allocated;
    memory_of(&d, &total, &reserved, &allocated);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = allocated;
    memory->free = total - reserved - allocated;
    return NVML_SUCCESS;
}

/* A MIG device: its GPU instance's profile, its compute instance's slices.
 * A whole GPU: every slice of its largest profile and all its memory. */
static nvmlReturn_t device_attributes(const char *call, nvmlDevice_t device, nvmlDeviceAttributes_t *a)
{
    devref_t d;
    nvmlReturn_t rc = enter_device(call, device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!a)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(a, 0, sizeof *a);
    unsigned long long total, reserved, allocated;
    memory_of(&d, &total, &reserved, &allocated);
    a->memorySizeMB = total >> 20;
    if (!d.mig) {
        a->multiprocessorCount = d.gpu->sm_count;
        for (unsigned i = 0; i < d.gpu->nprofiles; i++)
            if (d.gpu->profiles[i].slices > a->gpuInstanceSliceCount)
                a->gpuInstanceSliceCount = d.gpu->profiles[i].slices;
        a->computeInstanceSliceCount = a->gpuInstanceSliceCount;
        return NVML_SUCCESS;
    }
    const sim_profile_t *p = profile_by_id(d.gpu, d.gpu->gis[d.gi].profile_id);
    if (!p)
        return NVML_ERROR_UNKNOWN;
    unsigned ci_slices = d.gpu->cis[d.gi][d.ci].span.size;
    a->gpuInstanceSliceCount = p->slices;
    a->computeInstanceSliceCount = ci_slices;
    a->multiprocessorCount = p->slices ? p->sm / p->slices * ci_slices : 0;
    a->sharedCopyEngineCount = p->ce;
    a->sharedDecoderCount = p->dec;
    a->sharedEncoderCount = p->enc;
    a->sharedJpegCount = p->jpeg;
    a->sharedOfaCount = p->ofa;
    a->memorySizeMB = p->memory_mb;
    return NVML_SUCCESS;
}

static nvmlReturn_t device_arch(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetArchitecture", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!arch)
        return NVML_ERROR_INVALID_ARGUMENT;
    *arch = d.gpu->arch;
    return NVML_SUCCESS;
}

static nvmlReturn_t device_cc(nvmlDevice_t device, int *major, int *minor)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetCudaComputeCapability", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = d.gpu->cc_major;
    *minor = d.gpu->cc_minor;
    return NVML_SUCCESS;
}

static nvmlReturn_t device_persistence(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetPersistenceMode", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!mode)
        return NVML_ERROR_INVALID_ARGUMENT;
    *mode = d.gpu->persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

/* *infoCount is the capacity of infos on input and the number of processes
 * on output; too small -> INSUFFICIENT_SIZE with the needed count (the
 * documented way to query the count is *infoCount = 0, infos = NULL). */
static nvmlReturn_t device_procs(nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_t *infos)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetComputeRunningProcesses_v3", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count || (!infos && *count > 0))
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    for (unsigned i = 0; i < g_state->nprocs; i++) {
        const sim_proc_t *p = &g_state->procs[i];
        if (p->gpu != d.index || (d.mig && (p->gi != (int)d.gi || p->ci != (int)d.ci)))
            continue;
        if (n < *count) {
            int mig = d.gpu->mig_current && p->gi >= 0;
            infos[n].pid = p->pid;
            infos[n].usedGpuMemory = p->used_memory;
            infos[n].gpuInstanceId = mig ? (unsigned)p->gi : NOT_IN_MIG;
            infos[n].computeInstanceId = mig && p->ci >= 0 ? (unsigned)p->ci : NOT_IN_MIG;
        }
        n++;
    }
    rc = n > *count ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *count = n;
    return rc;
}

/* ---- MIG mode -------------------------------------------------------------- */

static nvmlReturn_t get_mig_mode(nvmlDevice_t device, unsigned int *current, unsigned int *pending)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetMigMode", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.gpu->mig_capable || d.mig)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = d.gpu->mig_current;
    *pending = d.gpu->mig_pending;
    return NVML_SUCCESS;
}

static int gpu_has_gis(const sim_gpu_t *g)
{
    for (unsigned i = 0; i < MAX_GI_IDS; i++)
        if (g->gis[i].present)
            return 1;
    return 0;
}

/* Set the pending mode, then try to activate it like the driver does: an
 * idle GPU with mig_toggle=immediate switches now; one with client processes
 * reports IN_USE, one that needs a reboot RESET_REQUIRED (both in
 * activationStatus, with the pending mode recorded).  Disabling MIG while GPU
 * instances exist is refused outright. */
static nvmlReturn_t set_mig_mode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activation)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceSetMigMode", device, DEV_PHYSICAL, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!activation || (mode != NVML_DEVICE_MIG_DISABLE && mode != NVML_DEVICE_MIG_ENABLE))
        return NVML_ERROR_INVALID_ARGUMENT;
    sim_gpu_t *g = d.gpu;
    if (!g->mig_capable)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!may_change())
        return NVML_ERROR_NO_PERMISSION;
    if (mode == NVML_DEVICE_MIG_DISABLE && g->mig_current && gpu_has_gis(g)) {
        *activation = NVML_ERROR_IN_USE;
        return NVML_ERROR_IN_USE;
    }
    g->mig_pending = mode;
    if (g->mig_pending == g->mig_current)
        *activation = NVML_SUCCESS;
    else if (procs_on(g_state, d.index, -1, -1) > 0)
        *activation = NVML_ERROR_IN_USE;
    else if (g->mig_toggle_reboot)
        *activation = NVML_ERROR_RESET_REQUIRED;
    else {
        g->mig_current = g->mig_pending;
        *activation = NVML_SUCCESS;
    }
    save_state(g_state);
    return NVML_SUCCESS;
}

/* ---- GPU-instance profiles ---------------------------------------------------- */

static void fill_gi_profile(const sim_profile_t *p, nvmlGpuInstanceProfileInfo_t *info)
{
    memset(info, 0, sizeof *info);
    info->id = p->id;
    info->isP2pSupported = p->p2p;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->sm;
    info->copyEngineCount = p->ce;
    info->decoderCount = p->dec;
    info->encoderCount = p->enc;
    info->jpegCount = p->jpeg;
    info->ofaCount = p->ofa;
    info->memorySizeMB = p->memory_mb;
}

static void fill_gi_profile_v2(const sim_profile_t *p, nvmlGpuInstanceProfileInfo_v2_t *info)
{
    unsigned version = info->version;
    memset(info, 0, sizeof *info);
    info->version = version;
    info->id = p->id;
    info->isP2pSupported = p->p2p;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->sm;
    info->copyEngineCount = p->ce;
    info->decoderCount = p->dec;
    info->encoderCount = p->enc;
    info->jpegCount = p->jpeg;
    info->ofaCount = p->ofa;
    info->memorySizeMB = p->memory_mb;
    scopy(info->name, sizeof info->name, p->name);
}

/* Shared checks of the device-level MIG calls, in the driver's order:
 * arguments, MIG capability, privilege, MIG mode enabled. */
enum { NEED_MIG_ON = 1, NEED_ROOT = 2, NEED_WRITE = 4 };

static nvmlReturn_t mig_gate(const devref_t *d, int need)
{
    if (!d->gpu->mig_capable)
        return NVML_ERROR_NOT_SUPPORTED;
    if ((need & NEED_ROOT) && !privileged())
        return NVML_ERROR_NO_PERMISSION;
    if ((need & NEED_WRITE) && !may_change())
        return NVML_ERROR_NO_PERMISSION;
    if ((need & NEED_MIG_ON) && !d->gpu->mig_current)
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* bad_version: the caller's versioned struct carries a version we do not
 * implement; nvml.h calls that an invalid argument for the V variants. */
static nvmlReturn_t gi_profile_lookup(const char *call, nvmlDevice_t device, unsigned int key, int by_id,
                                      const void *info, int bad_version, const sim_profile_t **out)
{
    devref_t d;
    nvmlReturn_t rc = enter_device(call, device, DEV_PHYSICAL, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!info || bad_version || (!by_id && key >= NVML_GPU_INSTANCE_PROFILE_COUNT))
        return NVML_ERROR_INVALID_ARGUMENT;
    /* Some drivers describe profiles only with MIG on; 580 on an H100 also
     * answered with MIG off (tests/device/h100-reading-2026-11-23.json). */
    rc = mig_gate(&d, d.gpu->mig_profiles_off ? 0 : NEED_MIG_ON);
    if (rc != NVML_SUCCESS)
        return rc;
    *out = by_id ? profile_by_id(d.gpu, key) : profile_by_index(d.gpu, key);
    return *out ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

static nvmlReturn_t gi_profile_info(nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t *info)
{
    const sim_profile_t *p = NULL;
    nvmlReturn_t rc = gi_profile_lookup("nvmlDeviceGetGpuInstanceProfileInfo", device, profile, 0, info, 0, &p);
    if (rc == NVML_SUCCESS)
        fill_gi_profile(p, info);
    return rc;
}

static nvmlReturn_t gi_profile_info_v(const char *call, nvmlDevice_t device, unsigned int key, int by_id,
                                      nvmlGpuInstanceProfileInfo_v2_t *info)
{
    const sim_profile_t *p = NULL;
    int bad_version = info && info->version != nvmlGpuInstanceProfileInfo_v2;
    nvmlReturn_t rc = gi_profile_lookup(call, device, key, by_id, info, bad_version, &p);
    if (rc == NVML_SUCCESS)
        fill_gi_profile_v2(p, info);
    return rc;
}

static nvmlReturn_t gi_placements(nvmlDevice_t device, unsigned int profile_id, nvmlGpuInstancePlacement_t *out,
                                  unsigned int *count)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetGpuInstancePossiblePlacements_v2", device, DEV_PHYSICAL, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* possible placements are a property of the hardware: MIG need not be on */
    rc = mig_gate(&d, NEED_ROOT);
    if (rc != NVML_SUCCESS)
        return rc;
    const sim_profile_t *p = profile_by_id(d.gpu, profile_id);
    if (!p)
        return NVML_ERROR_NOT_SUPPORTED;
    if (out)
        for (unsigned k = 0; k < p->nplacements; k++) {
            out[k].start = p->placements[k].start;
            out[k].size = p->placements[k].size;
        }
    *count = p->nplacements;
    return NVML_SUCCESS;
}

static nvmlReturn_t gi_remaining(nvmlDevice_t device, unsigned int profile_id, unsigned int *count)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetGpuInstanceRemainingCapacity", device, DEV_PHYSICAL, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = mig_gate(&d, NEED_ROOT | NEED_MIG_ON);
    if (rc != NVML_SUCCESS)
        return rc;
    const sim_profile_t *p = profile_by_id(d.gpu, profile_id);
    if (!p)
        return NVML_ERROR_NOT_SUPPORTED;
    gi_layout_t l;
    span_t s;
    unsigned n = 0;
    gi_layout_of(d.gpu, &l);
    while (gi_layout_pick(d.gpu, &l, p, &s)) {
        gi_layout_add(&l, p, s);
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}

static nvmlReturn_t gi_create(const char *call, nvmlDevice_t device, unsigned int profile_id,
                              const nvmlGpuInstancePlacement_t *placement, int with_placement, nvmlGpuInstance_t *out)
{
    devref_t d;
    nvmlReturn_t rc = enter_device(call, device, DEV_PHYSICAL, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out || (with_placement && !placement))
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = mig_gate(&d, NEED_ROOT | NEED_WRITE | NEED_MIG_ON);
    if (rc != NVML_SUCCESS)
        return rc;
    sim_gpu_t *g = d.gpu;
    const sim_profile_t *p = profile_by_id(g, profile_id);
    if (!p)
        return NVML_ERROR_NOT_SUPPORTED;
    gi_layout_t l;
    span_t s;
    gi_layout_of(g, &l);
    if (with_placement) {
        s.start = placement->start;
        s.size = placement->size;
        rc = gi_layout_check(g, &l, p, s);
        if (rc != NVML_SUCCESS)
            return rc;
    } else if (!gi_layout_pick(g, &l, p, &s)) {
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    unsigned id;
    if (!gi_id_for(g, s, &id) || g->gis[id].present)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    memset(&g->gis[id], 0, sizeof g->gis[id]);
    g->gis[id].present = 1;
    g->gis[id].profile_id = p->id;
    g->gis[id].span = s;
    save_state(g_state);
    *out = &g_gih[d.index][id];
    return NVML_SUCCESS;
}

static nvmlReturn_t gi_destroy(nvmlGpuInstance_t h)
{
    instref_t r;
    nvmlReturn_t rc = enter_gi("nvmlGpuInstanceDestroy", h, &r);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!may_change())
        return NVML_ERROR_NO_PERMISSION;
    for (unsigned c = 0; c < MAX_CI_IDS; c++)
        if (r.gpu->cis[r.gi][c].present)
            return NVML_ERROR_IN_USE;
    if (procs_on(g_state, r.index, (int)r.gi, -1) > 0)
        return NVML_ERROR_IN_USE;
    memset(&r.gpu->gis[r.gi], 0, sizeof r.gpu->gis[r.gi]);
    save_state(g_state);
    return NVML_SUCCESS;
}

/* Listing needs only the world-readable 'monitor' capability on a real
 * node, so unlike create/destroy it does not require root. */
static nvmlReturn_t gi_list(nvmlDevice_t device, unsigned int profile_id, nvmlGpuInstance_t *out, unsigned int *count)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetGpuInstances", device, DEV_PHYSICAL, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = mig_gate(&d, NEED_MIG_ON);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!profile_by_id(d.gpu, profile_id))
        return NVML_ERROR_NOT_SUPPORTED;
    unsigned n = 0;
    for (unsigned id = 0; id < MAX_GI_IDS; id++)
        if (d.gpu->gis[id].present && d.gpu->gis[id].profile_id == profile_id)
            out[n++] = &g_gih[d.index][id];
    *count = n;
    return NVML_SUCCESS;
}

static nvmlReturn_t gi_by_id(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *out)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetGpuInstanceById", device, DEV_PHYSICAL, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = mig_gate(&d, NEED_MIG_ON);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!gi_live(d.gpu, id))
        return NVML_ERROR_NOT_FOUND;
    *out = &g_gih[d.index][id];
    return NVML_SUCCESS;
}

static nvmlReturn_t gi_info(nvmlGpuInstance_t h, nvmlGpuInstanceInfo_t *info)
{
    instref_t r;
    nvmlReturn_t rc = enter_gi("nvmlGpuInstanceGetInfo", h, &r);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    const sim_gi_t *gi = &r.gpu->gis[r.gi];
    memset(info, 0, sizeof *info);
    info->device = dev_handle(r.index);
    info->id = r.gi;
    info->profileId = gi->profile_id;
    info->placement.start = gi->span.start;
    info->placement.size = gi->span.size;
    return NVML_SUCCESS;
}

/* ---- compute instances ---------------------------------------------------- */

static void fill_ci_profile(const sim_profile_t *gp, const ci_profile_t *cp, nvmlComputeInstanceProfileInfo_t *info)
{
    memset(info, 0, sizeof *info);
    info->id = cp->index;
    info->sliceCount = cp->slices;
    info->instanceCount = cp->instances;
    info->multiprocessorCount = gp->slices ? gp->sm / gp->slices * cp->slices : 0;
    info->sharedCopyEngineCount = gp->ce;
    info->sharedDecoderCount = gp->dec;
    info->sharedEncoderCount = gp->enc;
    info->sharedJpegCount = gp->jpeg;
    info->sharedOfaCount = gp->ofa;
}

static nvmlReturn_t ci_profile_lookup(const char *call, nvmlGpuInstance_t h, unsigned int profile,
                                      unsigned int eng_profile, const void *info, int bad_version,
                                      const sim_profile_t **gp, ci_profile_t *cp)
{
    instref_t r;
    nvmlReturn_t rc = enter_gi(call, h, &r);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!info || bad_version || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        eng_profile >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    *gp = gi_profile(r.gpu, r.gi);
    if (!*gp || !ci_profile_get(*gp, profile, cp))
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_profile_info(nvmlGpuInstance_t h, unsigned int profile, unsigned int eng,
                                    nvmlComputeInstanceProfileInfo_t *info)
{
    const sim_profile_t *gp = NULL;
    ci_profile_t cp;
    nvmlReturn_t rc =
        ci_profile_lookup("nvmlGpuInstanceGetComputeInstanceProfileInfo", h, profile, eng, info, 0, &gp, &cp);
    if (rc == NVML_SUCCESS)
        fill_ci_profile(gp, &cp, info);
    return rc;
}

static nvmlReturn_t ci_profile_info_v(nvmlGpuInstance_t h, unsigned int profile, unsigned int eng,
                                      nvmlComputeInstanceProfileInfo_v2_t *info)
{
    const sim_profile_t *gp = NULL;
    ci_profile_t cp;
    int bad_version = info && info->version != nvmlComputeInstanceProfileInfo_v2;
    nvmlReturn_t rc = ci_profile_lookup("nvmlGpuInstanceGetComputeInstanceProfileInfoV", h, profile, eng, info,
                                        bad_version, &gp, &cp);
    if (rc != NVML_SUCCESS)
        return rc;
    nvmlComputeInstanceProfileInfo_t v1;
    fill_ci_profile(gp, &cp, &v1);
    unsigned version = info->version;
    memset(info, 0, sizeof *info);
    info->version = version;
    info->id = v1.id;
    info->sliceCount = v1.sliceCount;
    info->instanceCount = v1.instanceCount;
    info->multiprocessorCount = v1.multiprocessorCount;
    info->sharedCopyEngineCount = v1.sharedCopyEngineCount;
    info->sharedDecoderCount = v1.sharedDecoderCount;
    info->sharedEncoderCount = v1.sharedEncoderCount;
    info->sharedJpegCount = v1.sharedJpegCount;
    info->sharedOfaCount = v1.sharedOfaCount;
    ci_profile_name(gp, &cp, info->name, sizeof info->name);
    return NVML_SUCCESS;
}

/* Prologue of the CI calls keyed by a CI profile id on a GI handle. */
static nvmlReturn_t ci_enter_profile(const char *call, nvmlGpuInstance_t h, unsigned int profile_id, const void *arg,
                                     int need, instref_t *r, ci_profile_t *cp)
{
    nvmlReturn_t rc = enter_gi(call, h, r);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!arg)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((need & NEED_ROOT) && !privileged())
        return NVML_ERROR_NO_PERMISSION;
    if ((need & NEED_WRITE) && !may_change())
        return NVML_ERROR_NO_PERMISSION;
    const sim_profile_t *gp = gi_profile(r->gpu, r->gi);
    if (!gp || !ci_profile_get(gp, profile_id, cp))
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_remaining(nvmlGpuInstance_t h, unsigned int profile_id, unsigned int *count)
{
    instref_t r;
    ci_profile_t cp;
    nvmlReturn_t rc =
        ci_enter_profile("nvmlGpuInstanceGetComputeInstanceRemainingCapacity", h, profile_id, count, NEED_ROOT, &r, &cp);
    if (rc != NVML_SUCCESS)
        return rc;
    /* simulate successive creations on a scratch copy of the GI's CIs */
    sim_ci_t saved[MAX_CI_IDS];
    memcpy(saved, r.gpu->cis[r.gi], sizeof saved);
    unsigned n = 0;
    span_t s;
    while (ci_pick(r.gpu, r.gi, &cp, &s)) {
        unsigned c = 0;
        while (c < MAX_CI_IDS && r.gpu->cis[r.gi][c].present)
            c++;
        if (c == MAX_CI_IDS)
            break;
        r.gpu->cis[r.gi][c].present = 1;
        r.gpu->cis[r.gi][c].profile = cp.index;
        r.gpu->cis[r.gi][c].span = s;
        n++;
    }
    memcpy(r.gpu->cis[r.gi], saved, sizeof saved);
    *count = n;
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_placements(nvmlGpuInstance_t h, unsigned int profile_id, nvmlComputeInstancePlacement_t *out,
                                  unsigned int *count)
{
    instref_t r;
    ci_profile_t cp;
    nvmlReturn_t rc =
        ci_enter_profile("nvmlGpuInstanceGetComputeInstancePossiblePlacements", h, profile_id, count, NEED_ROOT, &r, &cp);
    if (rc != NVML_SUCCESS)
        return rc;
    if (out)
        for (unsigned k = 0; k < cp.instances; k++) {
            out[k].start = k * cp.slices;
            out[k].size = cp.slices;
        }
    *count = cp.instances;
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_create(const char *call, nvmlGpuInstance_t h, unsigned int profile_id,
                              const nvmlComputeInstancePlacement_t *placement, int with_placement,
                              nvmlComputeInstance_t *out)
{
    instref_t r;
    ci_profile_t cp;
    nvmlReturn_t rc = ci_enter_profile(call, h, profile_id, out, NEED_ROOT | NEED_WRITE, &r, &cp);
    if (rc != NVML_SUCCESS)
        return rc;
    if (with_placement && !placement)
        return NVML_ERROR_INVALID_ARGUMENT;
    span_t s;
    if (with_placement) {
        s.start = placement->start;
        s.size = placement->size;
        rc = ci_check(r.gpu, r.gi, &cp, s);
        if (rc != NVML_SUCCESS)
            return rc;
    } else if (!ci_pick(r.gpu, r.gi, &cp, &s)) {
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    unsigned c = 0; /* CI ids: lowest free */
    while (c < MAX_CI_IDS && r.gpu->cis[r.gi][c].present)
        c++;
    if (c == MAX_CI_IDS)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    sim_ci_t *ci = &r.gpu->cis[r.gi][c];
    memset(ci, 0, sizeof *ci);
    ci->present = 1;
    ci->profile = cp.index;
    ci->span = s;
    mig_uuid(ci->uuid, sizeof ci->uuid, r.gpu->uuid, r.gi, c);
    save_state(g_state);
    *out = &g_cih[r.index][r.gi][c];
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_destroy(nvmlComputeInstance_t h)
{
    instref_t r;
    nvmlReturn_t rc = enter_ci("nvmlComputeInstanceDestroy", h, &r);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!may_change())
        return NVML_ERROR_NO_PERMISSION;
    if (procs_on(g_state, r.index, (int)r.gi, (int)r.ci) > 0)
        return NVML_ERROR_IN_USE;
    memset(&r.gpu->cis[r.gi][r.ci], 0, sizeof r.gpu->cis[r.gi][r.ci]);
    save_state(g_state);
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_list(nvmlGpuInstance_t h, unsigned int profile_id, nvmlComputeInstance_t *out,
                            unsigned int *count)
{
    instref_t r;
    ci_profile_t cp;
    nvmlReturn_t rc = ci_enter_profile("nvmlGpuInstanceGetComputeInstances", h, profile_id, out, 0, &r, &cp);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    for (unsigned c = 0; c < MAX_CI_IDS; c++)
        if (r.gpu->cis[r.gi][c].present && r.gpu->cis[r.gi][c].profile == profile_id)
            out[n++] = &g_cih[r.index][r.gi][c];
    *count = n;
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_by_id(nvmlGpuInstance_t h, unsigned int id, nvmlComputeInstance_t *out)
{
    instref_t r;
    nvmlReturn_t rc = enter_gi("nvmlGpuInstanceGetComputeInstanceById", h, &r);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!ci_live(r.gpu, r.gi, id))
        return NVML_ERROR_NOT_FOUND;
    *out = &g_cih[r.index][r.gi][id];
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_info(nvmlComputeInstance_t h, nvmlComputeInstanceInfo_t *info)
{
    instref_t r;
    nvmlReturn_t rc = enter_ci("nvmlComputeInstanceGetInfo_v2", h, &r);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    const sim_ci_t *ci = &r.gpu->cis[r.gi][r.ci];
    memset(info, 0, sizeof *info);
    info->device = dev_handle(r.index);
    info->gpuInstance = &g_gih[r.index][r.gi];
    info->id = r.ci;
    info->profileId = ci->profile;
    info->placement.start = ci->span.start;
    info->placement.size = ci->span.size;
    return NVML_SUCCESS;
}

/* ---- MIG device handles ----------------------------------------------------- */

static nvmlReturn_t max_mig_devices(nvmlDevice_t device, unsigned int *count)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetMaxMigDeviceCount", device, DEV_PHYSICAL, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = d.gpu->mig_capable && d.gpu->mig_current ? gpu_compute_slices(d.gpu) : 0;
    return NVML_SUCCESS;
}

static nvmlReturn_t mig_by_index(nvmlDevice_t device, unsigned int index, nvmlDevice_t *out)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetMigDeviceHandleByIndex", device, DEV_PHYSICAL, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned gi, ci;
    if (!mig_device_at(d.gpu, index, &gi, &ci))
        return NVML_ERROR_NOT_FOUND;
    *out = &g_migdev[d.index][gi][ci];
    return NVML_SUCCESS;
}

static nvmlReturn_t parent_of_mig(nvmlDevice_t mig, nvmlDevice_t *out)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", mig, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out || !d.mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *out = dev_handle(d.index);
    return NVML_SUCCESS;
}

static nvmlReturn_t is_mig_handle(nvmlDevice_t device, unsigned int *is_mig)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceIsMigDeviceHandle", device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!is_mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig = d.mig ? 1 : 0;
    return NVML_SUCCESS;
}

static nvmlReturn_t mig_instance_id(const char *call, nvmlDevice_t device, unsigned int *id, int want_ci)
{
    devref_t d;
    nvmlReturn_t rc = enter_device(call, device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!id || !d.mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = want_ci ? d.ci : d.gi;
    return NVML_SUCCESS;
}


/* ---- health ------------------------------------------------------------------ */
/* Semantics: NVIDIA/go-nvml@2f9e261fe40a:gen/nvml/nvml.h, the doc comment of
 * each entry point (return codes, NULL arguments, count queries). */

/* Health calls take the physical GPU (a MIG device handle reads its parent's
 * board-level counters, as nvidia-smi shows them per GPU). */
static nvmlReturn_t enter_health(const char *call, nvmlDevice_t device, sim_health_t **h, sim_gpu_t **g)
{
    devref_t d;
    nvmlReturn_t rc = enter_device(call, device, DEV_ANY, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    *h = &d.gpu->health;
    if (g)
        *g = d.gpu;
    return NVML_SUCCESS;
}

static nvmlReturn_t ecc_mode(nvmlDevice_t device, nvmlEnableState_t *current, nvmlEnableState_t *pending)
{
    sim_health_t *h;
    nvmlReturn_t rc = enter_health("nvmlDeviceGetEccMode", device, &h, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!h->ecc_supported)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = h->ecc_mode ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    *pending = h->ecc_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

static nvmlReturn_t ecc_total(nvmlDevice_t device, nvmlMemoryErrorType_t type, nvmlEccCounterType_t counter,
                              unsigned long long *count)
{
    sim_health_t *h;
    nvmlReturn_t rc = enter_health("nvmlDeviceGetTotalEccErrors", device, &h, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count || (unsigned)type >= NVML_MEMORY_ERROR_TYPE_COUNT || (unsigned)counter >= NVML_ECC_COUNTER_TYPE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* "Only applicable to devices with ECC ... Requires ECC Mode to be enabled." */
    if (!h->ecc_supported || !h->ecc_mode)
        return NVML_ERROR_NOT_SUPPORTED;
    int unc = type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED;
    if (counter == NVML_VOLATILE_ECC)
        *count = unc ? h->ecc_vol_uncorr : h->ecc_vol_corr;
    else
        *count = unc ? h->ecc_agg_uncorr : h->ecc_agg_corr;
    return NVML_SUCCESS;
}

/* Page retirement: Kepler..Turing boards with ECC; Ampere and later remap
 * rows instead (nvidia-smi -q shows "Retired Pages: N/A" there). */
static int retired_pages_supported(const sim_gpu_t *g)
{
    const sim_health_t *h = &g->health;
    if (h->retired_pages_supported >= 0)
        return h->retired_pages_supported;
    return h->ecc_supported && g->arch != 0 && g->arch < NVML_DEVICE_ARCH_AMPERE;
}

static int remapped_rows_supported(const sim_gpu_t *g)
{
    const sim_health_t *h = &g->health;
    if (h->remapped_rows_supported >= 0)
        return h->remapped_rows_supported;
    return h->ecc_supported && g->arch >= NVML_DEVICE_ARCH_AMPERE && g->arch != NVML_DEVICE_ARCH_UNKNOWN;
}

static nvmlReturn_t retired_pages(const char *call, nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                  unsigned int *count, unsigned long long *addresses, unsigned long long *timestamps)
{
    sim_health_t *h;
    sim_gpu_t *g;
    nvmlReturn_t rc = enter_health(call, device, &h, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count || (unsigned)cause >= NVML_PAGE_RETIREMENT_CAUSE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!retired_pages_supported(g))
        return NVML_ERROR_NOT_SUPPORTED;
    unsigned have = *count;
    unsigned n = cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? h->retired_dbe : h->retired_sbe;
    /* pageCount in: the buffer size (0 = size query); out: the matching pages */
    *count = n;
    if (n > have)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    if (n && !addresses)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < n; i++) {
        /* stable made-up hardware page addresses, distinct per cause */
        addresses[i] = 0x100000ULL * (cause + 1) + 0x1000ULL * i;
        if (timestamps)
            timestamps[i] = 0;
    }
    return NVML_SUCCESS;
}

static nvmlReturn_t retired_pending(nvmlDevice_t device, nvmlEnableState_t *pending)
{
    sim_health_t *h;
    sim_gpu_t *g;
    nvmlReturn_t rc = enter_health("nvmlDeviceGetRetiredPagesPendingStatus", device, &h, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!retired_pages_supported(g))
        return NVML_ERROR_NOT_SUPPORTED;
    *pending = h->retired_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

static nvmlReturn_t remapped_rows(nvmlDevice_t device, unsigned int *corr, unsigned int *unc, unsigned int *pending,
                                  unsigned int *failure)
{
    sim_health_t *h;
    sim_gpu_t *g;
    nvmlReturn_t rc = enter_health("nvmlDeviceGetRemappedRows", device, &h, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!corr || !unc || !pending || !failure)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* nvml.h: "On MIG-enabled GPUs with active instances, querying the
     * number of remapped rows is not supported" */
    if (!remapped_rows_supported(g) || gpu_has_gis(g))
        return NVML_ERROR_NOT_SUPPORTED;
    *corr = h->remap_corr;
    *unc = h->remap_uncorr;
    *pending = h->remap_pending ? 1 : 0;
    *failure = h->remap_failure ? 1 : 0;
    return NVML_SUCCESS;
}

static nvmlReturn_t field_values(nvmlDevice_t device, int count, nvmlFieldValue_t *values)
{
    sim_health_t *h;
    nvmlReturn_t rc = enter_health("nvmlDeviceGetFieldValues", device, &h, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!values || count < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct timeval now;
    gettimeofday(&now, NULL);
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        v->timestamp = (long long)now.tv_sec * 1000000LL + now.tv_usec;
        v->latencyUsec = 0;
        memset(&v->value, 0, sizeof v->value);
        if (v->fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION && h->recovery_action >= 0) {
            v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            v->value.uiVal = (unsigned)h->recovery_action;
            v->nvmlReturn = NVML_SUCCESS;
        } else {
            /* each value carries its own status; the call itself succeeds */
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
    }
    return NVML_SUCCESS;
}

enum { PCIE_GEN, PCIE_GEN_MAX, PCIE_WIDTH, PCIE_WIDTH_MAX, PCIE_REPLAY };

static nvmlReturn_t pcie_query(const char *call, nvmlDevice_t device, int what, unsigned int *out)
{
    sim_health_t *h;
    nvmlReturn_t rc = enter_health(call, device, &h, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    long long v;
    switch (what) {
    case PCIE_GEN: v = h->pcie_gen; break;
    case PCIE_GEN_MAX: v = h->pcie_gen_max; break;
    case PCIE_WIDTH: v = h->pcie_width; break;
    case PCIE_WIDTH_MAX: v = h->pcie_width_max; break;
    default: v = h->pcie_replay; break;
    }
    if (v < 0) /* "if PCIe link information is not available" */
        return NVML_ERROR_NOT_SUPPORTED;
    *out = (unsigned)v;
    return NVML_SUCCESS;
}

static nvmlReturn_t nvlink_state(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *active)
{
    sim_health_t *h;
    nvmlReturn_t rc = enter_health("nvmlDeviceGetNvLinkState", device, &h, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!active)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!h->nvlinks)
        return NVML_ERROR_NOT_SUPPORTED;
    if (link >= h->nvlinks) /* "if device or link is invalid" */
        return NVML_ERROR_INVALID_ARGUMENT;
    *active = (h->nvlink_down >> link) & 1 ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

static nvmlReturn_t fabric_info(const char *call, nvmlDevice_t device, void *out, int versioned)
{
    sim_health_t *h;
    nvmlReturn_t rc = enter_health(call, device, &h, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned version = versioned ? *(unsigned *)out : 0;
    if (versioned && version != nvmlGpuFabricInfo_v2 && version != nvmlGpuFabricInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (h->fabric_state < 0) /* "If device doesn't support gpu fabric" */
        return NVML_ERROR_NOT_SUPPORTED;
    nvmlReturn_t status = (nvmlReturn_t)h->fabric_status;
    nvmlGpuFabricState_t state = (nvmlGpuFabricState_t)h->fabric_state;
    if (!versioned) {
        nvmlGpuFabricInfo_t *i = out;
        memset(i, 0, sizeof *i);
        memcpy(i->clusterUuid, h->cluster_uuid, sizeof i->clusterUuid);
        i->status = status;
        i->cliqueId = h->clique_id;
        i->state = state;
        return NVML_SUCCESS;
    }
    /* v2 is a prefix of v3; the health mask/summary read "not supported" */
    nvmlGpuFabricInfo_v3_t *i = out;
    memset(i, 0, version == nvmlGpuFabricInfo_v3 ? sizeof(nvmlGpuFabricInfo_v3_t) : sizeof(nvmlGpuFabricInfo_v2_t));
    i->version = version;
    memcpy(i->clusterUuid, h->cluster_uuid, sizeof i->clusterUuid);
    i->status = status;
    i->cliqueId = h->clique_id;
    i->state = state;
    return NVML_SUCCESS;
}

static nvmlReturn_t temperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int *temp)
{
    sim_health_t *h;
    nvmlReturn_t rc = enter_health("nvmlDeviceGetTemperature", device, &h, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!temp || sensor != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (h->temp < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *temp = (unsigned)h->temp;
    return NVML_SUCCESS;
}

static nvmlReturn_t temperature_threshold(nvmlDevice_t device, nvmlTemperatureThresholds_t type, unsigned int *temp)
{
    sim_health_t *h;
    nvmlReturn_t rc = enter_health("nvmlDeviceGetTemperatureThreshold", device, &h, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!temp || (unsigned)type >= NVML_TEMPERATURE_THRESHOLD_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    long long v = type == NVML_TEMPERATURE_THRESHOLD_SHUTDOWN   ? h->temp_shutdown
                  : type == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN ? h->temp_slowdown
                                                                : -1;
    if (v < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *temp = (unsigned)v;
    return NVML_SUCCESS;
}

static nvmlReturn_t clock_reasons(const char *call, nvmlDevice_t device, unsigned long long *mask)
{
    sim_health_t *h;
    nvmlReturn_t rc = enter_health(call, device, &h, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!mask)
        return NVML_ERROR_INVALID_ARGUMENT;
    *mask = h->clock_event_reasons;
    return NVML_SUCCESS;
}

static nvmlReturn_t power_query(const char *call, nvmlDevice_t device, int limit, unsigned int *mw)
{
    sim_health_t *h;
    nvmlReturn_t rc = enter_health(call, device, &h, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!mw)
        return NVML_ERROR_INVALID_ARGUMENT;
    long long v = limit ? h->power_limit_mw : h->power_mw;
    if (v < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *mw = (unsigned)v;
    return NVML_SUCCESS;
}

/* ======================================================================== */
/* 8. exported entry points                                                 */
/* ======================================================================== */

/* Every entry point runs under one process-wide lock, as NVML is documented
 * to be thread-safe. */
#define LOCKED(expr)                                                                                                   \
    do {                                                                                                               \
        pthread_mutex_lock(&g_lock);                                                                                   \
        nvmlReturn_t r_ = (expr);                                                                                      \
        pthread_mutex_unlock(&g_lock);                                                                                 \
        return r_;                                                                                                     \
    } while (0)

SIM_API nvmlReturn_t nvmlInit(void) { LOCKED(do_init("nvmlInit", 0)); }
SIM_API nvmlReturn_t nvmlInit_v2(void) { LOCKED(do_init("nvmlInit_v2", 0)); }
SIM_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { LOCKED(do_init("nvmlInitWithFlags", flags)); }
SIM_API nvmlReturn_t nvmlShutdown(void) { LOCKED(do_shutdown()); }
SIM_API const char *nvmlErrorString(nvmlReturn_t result) { return error_string(result); }

SIM_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    LOCKED(system_driver_version(version, length));
}
SIM_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    LOCKED(with_system("nvmlSystemGetNVMLVersion", q_nvml_version, version, length));
}
SIM_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version)
{
    LOCKED(cuda_version("nvmlSystemGetCudaDriverVersion", version, 0));
}
SIM_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version)
{
    LOCKED(cuda_version("nvmlSystemGetCudaDriverVersion_v2", version, 1));
}

SIM_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { LOCKED(device_count("nvmlDeviceGetCount", count)); }
SIM_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    LOCKED(device_count("nvmlDeviceGetCount_v2", count));
}
SIM_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    LOCKED(handle_by_index("nvmlDeviceGetHandleByIndex", index, device));
}
SIM_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    LOCKED(handle_by_index("nvmlDeviceGetHandleByIndex_v2", index, device));
}
SIM_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    LOCKED(handle_by_uuid(uuid, device));
}
SIM_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device)
{
    LOCKED(handle_by_bus_id("nvmlDeviceGetHandleByPciBusId", bus_id, device));
}
SIM_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device)
{
    LOCKED(handle_by_bus_id("nvmlDeviceGetHandleByPciBusId_v2", bus_id, device));
}

SIM_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) { LOCKED(device_index(device, index)); }
SIM_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    LOCKED(device_name(device, name, length));
}
SIM_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    LOCKED(device_uuid(device, uuid, length));
}
SIM_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    LOCKED(device_serial(device, serial, length));
}
SIM_API nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *part, unsigned int length)
{
    LOCKED(device_part(device, part, length));
}
SIM_API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    LOCKED(device_minor(device, minor));
}
SIM_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    LOCKED(device_pci("nvmlDeviceGetPciInfo", device, pci, 0));
}
SIM_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    LOCKED(device_pci("nvmlDeviceGetPciInfo_v2", device, pci, 0));
}
SIM_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    LOCKED(device_pci("nvmlDeviceGetPciInfo_v3", device, pci, 1));
}
SIM_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    LOCKED(device_memory(device, memory));
}
SIM_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    LOCKED(device_memory_v2(device, memory));
}
SIM_API nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
    LOCKED(device_attributes("nvmlDeviceGetAttributes", device, attributes));
}
SIM_API nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
    LOCKED(device_attributes("nvmlDeviceGetAttributes_v2", device, attributes));
}
SIM_API nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
    LOCKED(device_arch(device, arch));
}
SIM_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    LOCKED(device_cc(device, major, minor));
}
SIM_API nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    LOCKED(device_persistence(device, mode));
}
SIM_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                             nvmlProcessInfo_t *infos)
{
    LOCKED(device_procs(device, infoCount, infos));
}

SIM_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
    LOCKED(get_mig_mode(device, currentMode, pendingMode));
}
SIM_API nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activationStatus)
{
    LOCKED(set_mig_mode(device, mode, activationStatus));
}
SIM_API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                         nvmlGpuInstanceProfileInfo_t *info)
{
    LOCKED(gi_profile_info(device, profile, info));
}
SIM_API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                          nvmlGpuInstanceProfileInfo_v2_t *info)
{
    LOCKED(gi_profile_info_v("nvmlDeviceGetGpuInstanceProfileInfoV", device, profile, 0, info));
}
SIM_API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t device, unsigned int profileId,
                                                              nvmlGpuInstanceProfileInfo_v2_t *info)
{
    LOCKED(gi_profile_info_v("nvmlDeviceGetGpuInstanceProfileInfoByIdV", device, profileId, 1, info));
}
SIM_API nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device, unsigned int profileId,
                                                                   nvmlGpuInstancePlacement_t *placements,
                                                                   unsigned int *count)
{
    LOCKED(gi_placements(device, profileId, placements, count));
}
SIM_API nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                               unsigned int *count)
{
    LOCKED(gi_remaining(device, profileId, count));
}
SIM_API nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                                 nvmlGpuInstance_t *gpuInstance)
{
    LOCKED(gi_create("nvmlDeviceCreateGpuInstance", device, profileId, NULL, 0, gpuInstance));
}
SIM_API nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                              const nvmlGpuInstancePlacement_t *placement,
                                                              nvmlGpuInstance_t *gpuInstance)
{
    LOCKED(gi_create("nvmlDeviceCreateGpuInstanceWithPlacement", device, profileId, placement, 1, gpuInstance));
}
SIM_API nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) { LOCKED(gi_destroy(gpuInstance)); }
SIM_API nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                               nvmlGpuInstance_t *gpuInstances, unsigned int *count)
{
    LOCKED(gi_list(device, profileId, gpuInstances, count));
}
SIM_API nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance)
{
    LOCKED(gi_by_id(device, id, gpuInstance));
}
SIM_API nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
    LOCKED(gi_info(gpuInstance, info));
}
SIM_API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                                  unsigned int engProfile,
                                                                  nvmlComputeInstanceProfileInfo_t *info)
{
    LOCKED(ci_profile_info(gpuInstance, profile, engProfile, info));
}
SIM_API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                                   unsigned int engProfile,
                                                                   nvmlComputeInstanceProfileInfo_v2_t *info)
{
    LOCKED(ci_profile_info_v(gpuInstance, profile, engProfile, info));
}
SIM_API nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(nvmlGpuInstance_t gpuInstance,
                                                                         unsigned int profileId,
                                                                         nvmlComputeInstancePlacement_t *placements,
                                                                         unsigned int *count)
{
    LOCKED(ci_placements(gpuInstance, profileId, placements, count));
}
SIM_API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                        unsigned int profileId, unsigned int *count)
{
    LOCKED(ci_remaining(gpuInstance, profileId, count));
}
SIM_API nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                          nvmlComputeInstance_t *computeInstance)
{
    LOCKED(ci_create("nvmlGpuInstanceCreateComputeInstance", gpuInstance, profileId, NULL, 0, computeInstance));
}
SIM_API nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(nvmlGpuInstance_t gpuInstance,
                                                                       unsigned int profileId,
                                                                       const nvmlComputeInstancePlacement_t *placement,
                                                                       nvmlComputeInstance_t *computeInstance)
{
    LOCKED(ci_create("nvmlGpuInstanceCreateComputeInstanceWithPlacement", gpuInstance, profileId, placement, 1,
                     computeInstance));
}
SIM_API nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance)
{
    LOCKED(ci_destroy(computeInstance));
}
SIM_API nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                        nvmlComputeInstance_t *computeInstances, unsigned int *count)
{
    LOCKED(ci_list(gpuInstance, profileId, computeInstances, count));
}
SIM_API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                           nvmlComputeInstance_t *computeInstance)
{
    LOCKED(ci_by_id(gpuInstance, id, computeInstance));
}
SIM_API nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                                   nvmlComputeInstanceInfo_t *info)
{
    LOCKED(ci_info(computeInstance, info));
}
SIM_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    LOCKED(max_mig_devices(device, count));
}
SIM_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                         nvmlDevice_t *migDevice)
{
    LOCKED(mig_by_index(device, index, migDevice));
}
SIM_API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device)
{
    LOCKED(parent_of_mig(migDevice, device));
}
SIM_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    LOCKED(is_mig_handle(device, isMigDevice));
}
SIM_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    LOCKED(mig_instance_id("nvmlDeviceGetGpuInstanceId", device, id, 0));
}
SIM_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    LOCKED(mig_instance_id("nvmlDeviceGetComputeInstanceId", device, id, 1));
}

/* ---- health ---- */
SIM_API nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current, nvmlEnableState_t *pending)
{
    LOCKED(ecc_mode(device, current, pending));
}
SIM_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                 nvmlEccCounterType_t counterType, unsigned long long *eccCounts)
{
    LOCKED(ecc_total(device, errorType, counterType, eccCounts));
}
SIM_API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                               unsigned int *pageCount, unsigned long long *addresses)
{
    LOCKED(retired_pages("nvmlDeviceGetRetiredPages", device, cause, pageCount, addresses, NULL));
}
SIM_API nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                                  unsigned int *pageCount, unsigned long long *addresses,
                                                  unsigned long long *timestamps)
{
    LOCKED(retired_pages("nvmlDeviceGetRetiredPages_v2", device, cause, pageCount, addresses, timestamps));
}
SIM_API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, nvmlEnableState_t *isPending)
{
    LOCKED(retired_pending(device, isPending));
}
SIM_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
                                               unsigned int *isPending, unsigned int *failureOccurred)
{
    LOCKED(remapped_rows(device, corrRows, uncRows, isPending, failureOccurred));
}
SIM_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
    LOCKED(field_values(device, valuesCount, values));
}
SIM_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)
{
    LOCKED(pcie_query("nvmlDeviceGetCurrPcieLinkGeneration", device, PCIE_GEN, currLinkGen));
}
SIM_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGen)
{
    LOCKED(pcie_query("nvmlDeviceGetMaxPcieLinkGeneration", device, PCIE_GEN_MAX, maxLinkGen));
}
SIM_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)
{
    LOCKED(pcie_query("nvmlDeviceGetCurrPcieLinkWidth", device, PCIE_WIDTH, currLinkWidth));
}
SIM_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth)
{
    LOCKED(pcie_query("nvmlDeviceGetMaxPcieLinkWidth", device, PCIE_WIDTH_MAX, maxLinkWidth));
}
SIM_API nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
    LOCKED(pcie_query("nvmlDeviceGetPcieReplayCounter", device, PCIE_REPLAY, value));
}
SIM_API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive)
{
    LOCKED(nvlink_state(device, link, isActive));
}
SIM_API nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *gpuFabricInfo)
{
    LOCKED(fabric_info("nvmlDeviceGetGpuFabricInfo", device, gpuFabricInfo, 0));
}
SIM_API nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *gpuFabricInfo)
{
    LOCKED(fabric_info("nvmlDeviceGetGpuFabricInfoV", device, gpuFabricInfo, 1));
}
SIM_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                              unsigned int *temp)
{
    LOCKED(temperature(device, sensorType, temp));
}
SIM_API nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, nvmlTemperatureThresholds_t thresholdType,
                                                       unsigned int *temp)
{
    LOCKED(temperature_threshold(device, thresholdType, temp));
}
SIM_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *clocksEventReasons)
{
    LOCKED(clock_reasons("nvmlDeviceGetCurrentClocksEventReasons", device, clocksEventReasons));
}
SIM_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                               unsigned long long *clocksThrottleReasons)
{
    LOCKED(clock_reasons("nvmlDeviceGetCurrentClocksThrottleReasons", device, clocksThrottleReasons));
}
SIM_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    LOCKED(power_query("nvmlDeviceGetPowerUsage", device, 0, power));
}
SIM_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    LOCKED(power_query("nvmlDeviceGetEnforcedPowerLimit", device, 1, limit));
}

/* ---- what Slurm's gpu/nvml plugin (AutoDetect=nvml) calls besides -------- */
/* slurmd loads the plugin with RTLD_LAZY and calls these on every GPU
 * (SchedMD/slurm src/plugins/gpu/nvml/gpu_nvml.c); a symbol missing here
 * ends slurmd with a symbol lookup error. */

/* The fixtures carry no NUMA topology: every GPU is local to every online
 * CPU, as on a one-socket host. */
static nvmlReturn_t device_cpu_affinity(nvmlDevice_t device, unsigned int cpuSetSize, unsigned long *cpuSet)
{
    devref_t d;
    nvmlReturn_t rc = enter_device("nvmlDeviceGetCpuAffinity", device, DEV_PHYSICAL, &d);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!cpuSet || cpuSetSize == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned long bits = 8 * sizeof(unsigned long);
    memset(cpuSet, 0, cpuSetSize * sizeof(unsigned long));
    for (long cpu = 0; cpu < online && (unsigned long)cpu < cpuSetSize * bits; cpu++)
        cpuSet[cpu / bits] |= 1UL << (cpu % bits);
    return NVML_SUCCESS;
}

/* Queries the simulator does not model: NOT_SUPPORTED, as on a GPU without them. */
static nvmlReturn_t device_unmodelled(const char *call, nvmlDevice_t device)
{
    devref_t d;
    nvmlReturn_t rc = enter_device(call, device, DEV_ANY, &d);
    return rc != NVML_SUCCESS ? rc : NVML_ERROR_NOT_SUPPORTED;
}

SIM_API nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize, unsigned long *cpuSet)
{
    LOCKED(device_cpu_affinity(device, cpuSetSize, cpuSet));
}
SIM_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci)
{
    (void)link;
    (void)pci;
    LOCKED(device_unmodelled("nvmlDeviceGetNvLinkRemotePciInfo_v2", device));
}
SIM_API nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int *count, unsigned int *clocksMHz)
{
    (void)count;
    (void)clocksMHz;
    LOCKED(device_unmodelled("nvmlDeviceGetSupportedMemoryClocks", device));
}
SIM_API nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned int memoryClockMHz, unsigned int *count,
                                                          unsigned int *clocksMHz)
{
    (void)memoryClockMHz;
    (void)count;
    (void)clocksMHz;
    LOCKED(device_unmodelled("nvmlDeviceGetSupportedGraphicsClocks", device));
}
SIM_API nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, int clockType, unsigned int *clockMHz)
{
    (void)clockType;
    (void)clockMHz;
    LOCKED(device_unmodelled("nvmlDeviceGetApplicationsClock", device));
}
SIM_API nvmlReturn_t nvmlDeviceSetApplicationsClocks(nvmlDevice_t device, unsigned int memClockMHz, unsigned int graphicsClockMHz)
{
    (void)memClockMHz;
    (void)graphicsClockMHz;
    LOCKED(device_unmodelled("nvmlDeviceSetApplicationsClocks", device));
}
SIM_API nvmlReturn_t nvmlDeviceResetApplicationsClocks(nvmlDevice_t device)
{
    LOCKED(device_unmodelled("nvmlDeviceResetApplicationsClocks", device));
}
SIM_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos)
{
    (void)infoCount;
    (void)infos;
    LOCKED(device_unmodelled("nvmlDeviceGetGraphicsRunningProcesses_v3", device));
}
SIM_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, void *utilization, unsigned int *processSamplesCount,
                                                     unsigned long long lastSeenTimeStamp)
{
    (void)utilization;
    (void)processSamplesCount;
    (void)lastSeenTimeStamp;
    LOCKED(device_unmodelled("nvmlDeviceGetProcessUtilization", device));
}
