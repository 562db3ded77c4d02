/*
 * nvidia_smi.c - a native nvidia-smi for simulated nodes.
 *
 * A container started with the CDI device nvidia.com/gpu=all gets the host's
 * libnvidia-ml.so.<version> and nvidia-smi bind-mounted, but no Python and no
 * /var/lib/nvml-sim/state.  This binary answers the read-only commands a
 * workload check runs, through NVML calls only, like the real tool:
 *
 *   nvidia-smi -L | --list-gpus
 *   nvidia-smi --query-gpu=index,uuid,name,driver_version,pci.bus_id
 *              --format=csv[,noheader][,nounits] [-i N[,M...]]
 *
 * Everything else is handed to the Python implementation (nvidia-smi.py next
 * to this binary, else /usr/local/lib/nvml-sim/nvidia-smi.py), so the MIG
 * scenario's --gpu-reset keeps working on a node.
 *
 * The library is dlopen()ed at run time, as the real nvidia-smi does: linked
 * against the simulator it would find nothing the CDI spec did not mount.
 * Exit status is the NVML return code of the failure, as the real tool's
 * documented codes are (9 driver not loaded, 4 no permission, 15 GPU lost,
 * ...), 12 when libnvidia-ml.so.1 cannot be loaded, 13 when it lacks a
 * function, 255 for codes that do not fit.
 */
#define _GNU_SOURCE
#include "nvml_abi.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bind the dl* calls to their first versions: since glibc 2.34 they live in
 * libc.so.6 as GLIBC_2.34, which would raise the binary's floor above the
 * library's (GLIBC_2.14); the Makefile links libdl.so.2, where older glibc
 * keeps them. */
#if defined(__x86_64__) && defined(__GLIBC__)
__asm__(".symver dlopen, dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym, dlsym@GLIBC_2.2.5");
__asm__(".symver dlerror, dlerror@GLIBC_2.2.5");
#endif

#define PY_NAME "nvidia-smi.py"
#define PY_INSTALLED "/usr/local/lib/nvml-sim/" PY_NAME
#define MAX_IDS 64

enum {
    EXIT_OK = 0,
    EXIT_INVALID_ARGUMENT = 2,
    EXIT_NOT_FOUND = 6,
    EXIT_DRIVER_NOT_LOADED = 9,
    EXIT_LIBRARY_NOT_FOUND = 12,
    EXIT_FUNCTION_NOT_FOUND = 13,
    EXIT_OTHER = 255,
};

static const char NO_DRIVER[] =
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
    "NVIDIA driver is installed and running.";
static const char NO_LIBRARY[] =
    "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display "
    "Driver is properly installed and present in your system.\n"
    "Please also try adding directory that contains libnvidia-ml.so to your system PATH.";

/* ---- the NVML entry points used --------------------------------------------- */

static struct {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*driver_version)(char *, unsigned int);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*max_mig)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
} nvml;

static const struct {
    const char *symbol;
    size_t offset;
} k_symbols[] = {
    {"nvmlInit_v2", offsetof(__typeof__(nvml), init)},
    {"nvmlShutdown", offsetof(__typeof__(nvml), shutdown)},
    {"nvmlErrorString", offsetof(__typeof__(nvml), error_string)},
    {"nvmlSystemGetDriverVersion", offsetof(__typeof__(nvml), driver_version)},
    {"nvmlDeviceGetCount_v2", offsetof(__typeof__(nvml), count)},
    {"nvmlDeviceGetHandleByIndex_v2", offsetof(__typeof__(nvml), by_index)},
    {"nvmlDeviceGetName", offsetof(__typeof__(nvml), name)},
    {"nvmlDeviceGetUUID", offsetof(__typeof__(nvml), uuid)},
    {"nvmlDeviceGetPciInfo_v3", offsetof(__typeof__(nvml), pci)},
    {"nvmlDeviceGetMigMode", offsetof(__typeof__(nvml), mig_mode)},
    {"nvmlDeviceGetMaxMigDeviceCount", offsetof(__typeof__(nvml), max_mig)},
    {"nvmlDeviceGetMigDeviceHandleByIndex", offsetof(__typeof__(nvml), mig_by_index)},
};

static int exit_code(nvmlReturn_t rc)
{
    return rc > 0 && rc < 255 ? (int)rc : EXIT_OTHER;
}

/* 0, or the exit status after saying what is missing. */
static int load_nvml(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        puts(NO_LIBRARY);
        fprintf(stderr, "nvidia-smi: %s\n", why ? why : "dlopen failed");
        return EXIT_LIBRARY_NOT_FOUND;
    }
    for (size_t i = 0; i < sizeof k_symbols / sizeof k_symbols[0]; i++) {
        void *sym = dlsym(lib, k_symbols[i].symbol);
        if (!sym) {
            fprintf(stderr, "nvidia-smi: libnvidia-ml.so.1 has no %s\n", k_symbols[i].symbol);
            return EXIT_FUNCTION_NOT_FOUND;
        }
        memcpy((char *)&nvml + k_symbols[i].offset, &sym, sizeof sym);
    }
    return 0;
}

/* nvmlInit_v2 with the real tool's messages; 0 or the exit status. */
static int start_nvml(void)
{
    int rc = load_nvml();
    if (rc)
        return rc;
    nvmlReturn_t r = nvml.init();
    if (r == NVML_SUCCESS)
        return 0;
    if (r == NVML_ERROR_DRIVER_NOT_LOADED) {
        puts(NO_DRIVER);
        return EXIT_DRIVER_NOT_LOADED;
    }
    if (r == NVML_ERROR_GPU_NOT_FOUND) {
        puts("No devices were found");
        return EXIT_NOT_FOUND;
    }
    printf("Failed to initialize NVML: %s\n", nvml.error_string(r));
    return exit_code(r);
}

static int device(unsigned int i, nvmlDevice_t *dev)
{
    nvmlReturn_t r = nvml.by_index(i, dev);
    if (r == NVML_SUCCESS)
        return 0;
    printf("Unable to determine the device handle for GPU%u: %s\n", i, nvml.error_string(r));
    return exit_code(r);
}

/* ---- -L ------------------------------------------------------------------ */

/* The MIG profile of a MIG device, from its name "<GPU name> MIG <profile>". */
static const char *mig_profile(const char *name)
{
    const char *p = strstr(name, " MIG ");
    return p ? p + 5 : name;
}

static void list_mig_devices(nvmlDevice_t gpu)
{
    unsigned int current = 0, pending = 0, max = 0;
    if (nvml.mig_mode(gpu, &current, &pending) != NVML_SUCCESS || current != 1)
        return;
    if (nvml.max_mig(gpu, &max) != NVML_SUCCESS)
        return;
    unsigned int shown = 0;
    for (unsigned int m = 0; m < max; m++) {
        nvmlDevice_t mig;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        if (nvml.mig_by_index(gpu, m, &mig) != NVML_SUCCESS)
            continue; /* NOT_FOUND: an index without a MIG device */
        if (nvml.name(mig, name, sizeof name) != NVML_SUCCESS)
            snprintf(name, sizeof name, "Unknown Error");
        if (nvml.uuid(mig, uuid, sizeof uuid) != NVML_SUCCESS)
            snprintf(uuid, sizeof uuid, "N/A");
        printf("  MIG %-12s Device %2u: (UUID: %s)\n", mig_profile(name), shown++, uuid);
    }
}

static int list_gpus(void)
{
    unsigned int count = 0;
    nvmlReturn_t r = nvml.count(&count);
    if (r != NVML_SUCCESS) {
        printf("Unable to determine the number of GPUs: %s\n", nvml.error_string(r));
        return exit_code(r);
    }
    int status = EXIT_OK;
    for (unsigned int i = 0; i < count; i++) {
        nvmlDevice_t gpu;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        int rc = device(i, &gpu);
        if (rc) {
            status = rc;
            continue;
        }
        if (nvml.name(gpu, name, sizeof name) != NVML_SUCCESS)
            snprintf(name, sizeof name, "Unknown Error");
        if (nvml.uuid(gpu, uuid, sizeof uuid) != NVML_SUCCESS)
            snprintf(uuid, sizeof uuid, "N/A");
        printf("GPU %u: %s (UUID: %s)\n", i, name, uuid);
        list_mig_devices(gpu);
    }
    return status;
}

/* ---- --query-gpu ----------------------------------------------------------- */

enum field { F_INDEX, F_UUID, F_NAME, F_DRIVER, F_BUS_ID };

static const struct {
    const char *name; /* as the header shows it */
    const char *alias;
    enum field field;
} k_fields[] = {
    {"index", NULL, F_INDEX},
    {"uuid", "gpu_uuid", F_UUID},
    {"name", "gpu_name", F_NAME},
    {"driver_version", NULL, F_DRIVER},
    {"pci.bus_id", "gpu_bus_id", F_BUS_ID},
};
#define NFIELDS (sizeof k_fields / sizeof k_fields[0])

typedef struct {
    size_t fields[32]; /* indices into k_fields */
    size_t nfields;
    int header;
    unsigned int ids[MAX_IDS];
    size_t nids; /* 0: every GPU */
} query_t;

/* Split "a,b,c" in place; calls fn on each non-empty part.  0 on success. */
static int each_part(char *list, int (*fn)(query_t *, const char *), query_t *q)
{
    for (char *save = NULL, *part = strtok_r(list, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
        while (*part == ' ')
            part++;
        if (*part && fn(q, part))
            return 1;
    }
    return 0;
}

static int add_field(query_t *q, const char *name)
{
    for (size_t i = 0; i < NFIELDS; i++) {
        if (strcmp(name, k_fields[i].name) == 0 || (k_fields[i].alias && strcmp(name, k_fields[i].alias) == 0)) {
            if (q->nfields == sizeof q->fields / sizeof q->fields[0])
                return 1;
            q->fields[q->nfields++] = i;
            return 0;
        }
    }
    printf("Field \"%s\" is not a valid field to query.\n", name);
    return 1;
}

static int add_format(query_t *q, const char *opt)
{
    if (strcmp(opt, "csv") == 0)
        return 0;
    if (strcmp(opt, "noheader") == 0) {
        q->header = 0;
        return 0;
    }
    if (strcmp(opt, "nounits") == 0)
        return 0; /* none of the fields has a unit */
    printf("Invalid format option \"%s\".\n", opt);
    return 1;
}

static int add_id(query_t *q, const char *id)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(id, &end, 10);
    if (errno || *end || end == id || v > UINT_MAX || q->nids == MAX_IDS) {
        /* the real tool also takes UUIDs and bus ids; the simulator's callers use indices */
        printf("Invalid GPU index \"%s\" (this nvidia-smi takes indices only).\n", id);
        return 1;
    }
    q->ids[q->nids++] = (unsigned int)v;
    return 0;
}

static void print_field(nvmlDevice_t gpu, unsigned int index, enum field f)
{
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE + NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    nvmlReturn_t r = NVML_SUCCESS;
    nvmlPciInfo_t pci;
    switch (f) {
    case F_INDEX:
        snprintf(buf, sizeof buf, "%u", index);
        break;
    case F_UUID:
        r = nvml.uuid(gpu, buf, sizeof buf);
        break;
    case F_NAME:
        r = nvml.name(gpu, buf, sizeof buf);
        break;
    case F_DRIVER:
        r = nvml.driver_version(buf, sizeof buf);
        break;
    case F_BUS_ID:
        memset(&pci, 0, sizeof pci);
        r = nvml.pci(gpu, &pci);
        if (r == NVML_SUCCESS)
            snprintf(buf, sizeof buf, "%s", pci.busId);
        break;
    }
    if (r == NVML_ERROR_NOT_SUPPORTED)
        snprintf(buf, sizeof buf, "[N/A]");
    else if (r != NVML_SUCCESS)
        snprintf(buf, sizeof buf, "[%s]", nvml.error_string(r));
    fputs(buf, stdout);
}

static int query_gpus(const query_t *q)
{
    unsigned int count = 0;
    nvmlReturn_t r = nvml.count(&count);
    if (r != NVML_SUCCESS) {
        printf("Unable to determine the number of GPUs: %s\n", nvml.error_string(r));
        return exit_code(r);
    }
    for (size_t k = 0; k < q->nids; k++) {
        if (q->ids[k] >= count) {
            printf("No devices were found matching \"%u\"\n", q->ids[k]);
            return EXIT_NOT_FOUND;
        }
    }
    if (q->header) {
        for (size_t k = 0; k < q->nfields; k++)
            printf("%s%s", k ? ", " : "", k_fields[q->fields[k]].name);
        putchar('\n');
    }
    int status = EXIT_OK;
    size_t n = q->nids ? q->nids : count;
    for (size_t k = 0; k < n; k++) {
        unsigned int i = q->nids ? q->ids[k] : (unsigned int)k;
        nvmlDevice_t gpu;
        int rc = device(i, &gpu);
        if (rc) {
            status = rc;
            continue;
        }
        for (size_t f = 0; f < q->nfields; f++) {
            if (f)
                fputs(", ", stdout);
            print_field(gpu, i, k_fields[q->fields[f]].field);
        }
        putchar('\n');
    }
    return status;
}

/* ---- command line ------------------------------------------------------------ */

enum command { C_OTHER, C_LIST, C_QUERY, C_BAD };

/* The value of "--opt=value" or "--opt value" (advancing *i); NULL if argv[*i] is not opt. */
static char *option(int argc, char **argv, int *i, const char *opt)
{
    size_t len = strlen(opt);
    if (strncmp(argv[*i], opt, len) != 0)
        return NULL;
    if (argv[*i][len] == '=')
        return argv[*i] + len + 1;
    if (argv[*i][len] == '\0' && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

static enum command parse(int argc, char **argv, query_t *q)
{
    if (argc == 2 && (strcmp(argv[1], "-L") == 0 || strcmp(argv[1], "--list-gpus") == 0))
        return C_LIST;
    char *fields = NULL, *format = NULL, *ids = NULL, *v;
    for (int i = 1; i < argc; i++) {
        if ((v = option(argc, argv, &i, "--query-gpu")))
            fields = v;
        else if ((v = option(argc, argv, &i, "--format")))
            format = v;
        else if ((v = option(argc, argv, &i, "--id")) || (v = option(argc, argv, &i, "-i")))
            ids = v;
        else
            return C_OTHER;
    }
    if (!fields || !format)
        return C_OTHER;
    q->header = 1;
    if (each_part(fields, add_field, q) || each_part(format, add_format, q) || (ids && each_part(ids, add_id, q)))
        return C_BAD;
    if (q->nfields == 0) {
        puts("--query-gpu needs at least one field.");
        return C_BAD;
    }
    return C_QUERY;
}

/* ---- everything else: the Python implementation -------------------------------- */

static int exec_python(char **argv)
{
    char exe[PATH_MAX], path[PATH_MAX + sizeof PY_NAME];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/%s", exe, PY_NAME);
            if (access(path, X_OK) == 0) {
                execv(path, argv);
                fprintf(stderr, "nvidia-smi: cannot run %s: %s\n", path, strerror(errno));
                return EXIT_OTHER;
            }
        }
    }
    if (access(PY_INSTALLED, X_OK) == 0) {
        execv(PY_INSTALLED, argv);
        fprintf(stderr, "nvidia-smi: cannot run %s: %s\n", PY_INSTALLED, strerror(errno));
        return EXIT_OTHER;
    }
    fprintf(stderr,
            "nvml-sim's native nvidia-smi answers only -L and --query-gpu=index,uuid,name,driver_version,pci.bus_id "
            "--format=csv[,noheader]; the rest needs the Python one (" PY_NAME
            " next to this binary or " PY_INSTALLED "), which is not here\n");
    return EXIT_INVALID_ARGUMENT;
}

int main(int argc, char **argv)
{
    query_t q;
    memset(&q, 0, sizeof q);
    enum command c = parse(argc, argv, &q);
    if (c == C_OTHER)
        return exec_python(argv);
    if (c == C_BAD)
        return EXIT_INVALID_ARGUMENT;
    int rc = start_nvml();
    if (rc)
        return rc;
    rc = c == C_LIST ? list_gpus() : query_gpus(&q);
    nvml.shutdown();
    return rc;
}

/* Our own process entry on x86_64 glibc: crt1.o calls __libc_start_main
 * @GLIBC_2.34 on a 2.34+ build host, which no older glibc has (CUDA images
 * still ship 2.31).  This is crt1's _start, bound to the first version of
 * __libc_start_main.  init/fini are NULL: glibc 2.34+ then runs the
 * program's init_array itself, older glibc runs none (this program has no
 * constructors).  The Makefile links with -nostartfiles. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(NVSMI_OWN_START)
__asm__(".symver __libc_start_main, __libc_start_main@GLIBC_2.2.5\n"
        ".text\n"
        ".globl _start\n"
        ".type _start, @function\n"
        "_start:\n"
        "  xorl %ebp, %ebp\n"
        "  movq %rdx, %r9\n"        /* rtld_fini */
        "  popq %rsi\n"             /* argc */
        "  movq %rsp, %rdx\n"       /* argv */
        "  andq $-16, %rsp\n"
        "  pushq %rax\n"
        "  pushq %rsp\n"            /* stack_end */
        "  xorl %r8d, %r8d\n"       /* fini */
        "  xorl %ecx, %ecx\n"       /* init */
        "  leaq main(%rip), %rdi\n"
        "  call *__libc_start_main@GOTPCREL(%rip)\n"
        "  hlt\n"
        ".size _start, . - _start\n");
#endif
