/*
 * nvml_abi.h - the subset of the NVML ABI that nvml-sim implements.
 *
 * These are our own declarations, written to be binary compatible with
 * NVIDIA's nvml.h (NVML API version 12/13): the same type names, field order,
 * field types, buffer sizes, constant values and symbol names.  Every struct
 * is pinned with static assertions at the bottom of this file, so a layout
 * change fails the build instead of silently corrupting callers.
 *
 * Not a copy of nvml.h: only what the simulator needs is declared here.
 */
#ifndef NVML_SIM_ABI_H
#define NVML_SIM_ABI_H

#include <stddef.h>

/* ---- return codes (nvmlReturn_t) --------------------------------------- */
typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* ---- opaque handles ------------------------------------------------------ */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;

/* ---- buffer sizes (nvmlConstants) --------------------------------------- */
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PART_NUMBER_BUFFER_SIZE 80
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30

/* ---- misc constants ------------------------------------------------------ */
#define NVML_INIT_FLAG_NO_GPUS 1
#define NVML_INIT_FLAG_NO_ATTACH 2

#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1

typedef enum nvmlEnableState_enum {
    NVML_FEATURE_DISABLED = 0,
    NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

typedef unsigned int nvmlDeviceArchitecture_t;
#define NVML_DEVICE_ARCH_KEPLER 2
#define NVML_DEVICE_ARCH_MAXWELL 3
#define NVML_DEVICE_ARCH_PASCAL 4
#define NVML_DEVICE_ARCH_VOLTA 5
#define NVML_DEVICE_ARCH_TURING 6
#define NVML_DEVICE_ARCH_AMPERE 7
#define NVML_DEVICE_ARCH_ADA 8
#define NVML_DEVICE_ARCH_HOPPER 9
#define NVML_DEVICE_ARCH_BLACKWELL 10
#define NVML_DEVICE_ARCH_UNKNOWN 0xffffffff

/* GPU-instance profile *indices* (not the unique profile ids). */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 0x8
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX 0xA
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX 0xB
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX 0xC
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME 0xD
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME 0xE
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME 0xF
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME 0x10
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX 0x11
#define NVML_GPU_INSTANCE_PROFILE_COUNT 0x12

/* Compute-instance profile indices; the CI profile id equals the index. */
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL 0x8
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT 0x9

#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT 0x1

/* ---- structs --------------------------------------------------------------- */
typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "%04X:%02X:%02X.0" */
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;    /* (device id << 16) | vendor id */
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "%08X:%02X:%02X.0" */
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used; /* reserved + allocated */
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

/* Layout used by nvmlDeviceGetComputeRunningProcesses_v3. */
typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;     /* 0xFFFFFFFF when not in MIG mode */
    unsigned int computeInstanceId; /* 0xFFFFFFFF when not in MIG mode */
} nvmlProcessInfo_v2_t, nvmlProcessInfo_t;

typedef struct nvmlGpuInstancePlacement_st {
    unsigned int start; /* first memory slice */
    unsigned int size;  /* memory slices */
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlGpuInstanceProfileInfo_v2_t;

typedef struct nvmlGpuInstanceInfo_st {
    nvmlDevice_t device;
    unsigned int id;
    unsigned int profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstancePlacement_st {
    unsigned int start; /* first compute slice inside the GPU instance */
    unsigned int size;  /* compute slices */
} nvmlComputeInstancePlacement_t;

/* Read by nvidia-ctk for MIG devices. */
typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlComputeInstanceProfileInfo_v2_t;

typedef struct nvmlComputeInstanceInfo_st {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id;
    unsigned int profileId;
    nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

/* ---- health queries ------------------------------------------------------------ */
/* Enums are ints in the ABI; the values are nvml.h's
 * (NVIDIA/go-nvml@2f9e261fe40a:gen/nvml/nvml.h). */
typedef enum nvmlMemoryErrorType_enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
    NVML_MEMORY_ERROR_TYPE_COUNT
} nvmlMemoryErrorType_t;

typedef enum nvmlEccCounterType_enum {
    NVML_VOLATILE_ECC = 0,
    NVML_AGGREGATE_ECC = 1,
    NVML_ECC_COUNTER_TYPE_COUNT
} nvmlEccCounterType_t;

typedef enum nvmlPageRetirementCause_enum {
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
    NVML_PAGE_RETIREMENT_CAUSE_COUNT
} nvmlPageRetirementCause_t;

typedef enum nvmlTemperatureSensors_enum {
    NVML_TEMPERATURE_GPU = 0,
    NVML_TEMPERATURE_COUNT
} nvmlTemperatureSensors_t;

typedef enum nvmlTemperatureThresholds_enum {
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
    NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
    NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
    NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN = 4,
    NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR = 5,
    NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX = 6,
    NVML_TEMPERATURE_THRESHOLD_GPS_CURR = 7,
    NVML_TEMPERATURE_THRESHOLD_COUNT
} nvmlTemperatureThresholds_t;

typedef enum nvmlValueType_enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    NVML_VALUE_TYPE_SIGNED_INT = 5,
    NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
    NVML_VALUE_TYPE_COUNT
} nvmlValueType_t;

typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;   /* CPU time of the value, microseconds since 1970 */
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn; /* per-value status: check before value */
    nvmlValue_t value;
} nvmlFieldValue_t;

/* Field ids (NVML_FI_*) the simulator answers; every other id gets a
 * per-value NVML_ERROR_NOT_SUPPORTED. */
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230
#define NVML_FI_MAX 303

/* nvmlDeviceGpuRecoveryAction_t */
#define NVML_GPU_RECOVERY_ACTION_NONE 0
#define NVML_GPU_RECOVERY_ACTION_GPU_RESET 1
#define NVML_GPU_RECOVERY_ACTION_NODE_REBOOT 2
#define NVML_GPU_RECOVERY_ACTION_DRAIN_P2P 3
#define NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET 4
#define NVML_GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN 5

#define NVML_NVLINK_MAX_LINKS 36

/* nvmlClocksEventReasons bits */
#define nvmlClocksEventReasonGpuIdle 0x0000000000000001ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksEventReasonSwPowerCap 0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown 0x0000000000000008ULL
#define nvmlClocksEventReasonSyncBoost 0x0000000000000010ULL
#define nvmlClocksEventReasonSwThermalSlowdown 0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown 0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown 0x0000000000000080ULL
#define nvmlClocksEventReasonDisplayClockSetting 0x0000000000000100ULL

/* Fabric probe (Hopper and later NVSwitch systems). */
#define NVML_GPU_FABRIC_UUID_LEN 16
#define NVML_GPU_FABRIC_STATE_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_STATE_NOT_STARTED 1
#define NVML_GPU_FABRIC_STATE_IN_PROGRESS 2
#define NVML_GPU_FABRIC_STATE_COMPLETED 3
typedef unsigned char nvmlGpuFabricState_t;

typedef struct {
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status; /* meaningful only when state is COMPLETED */
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
    unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
    unsigned int healthMask;
    unsigned char healthSummary;
} nvmlGpuFabricInfo_v3_t;
typedef nvmlGpuFabricInfo_v3_t nvmlGpuFabricInfoV_t;

/* NVML_STRUCT_VERSION(data, ver) = sizeof(struct) | (ver << 24) */
#define NVML_SIM_STRUCT_VERSION(type, ver) ((unsigned int)(sizeof(type) | ((unsigned int)(ver) << 24U)))
#define nvmlMemory_v2 NVML_SIM_STRUCT_VERSION(nvmlMemory_v2_t, 2)
#define nvmlGpuInstanceProfileInfo_v2 NVML_SIM_STRUCT_VERSION(nvmlGpuInstanceProfileInfo_v2_t, 2)
#define nvmlComputeInstanceProfileInfo_v2 NVML_SIM_STRUCT_VERSION(nvmlComputeInstanceProfileInfo_v2_t, 2)
#define nvmlGpuFabricInfo_v2 NVML_SIM_STRUCT_VERSION(nvmlGpuFabricInfo_v2_t, 2)
#define nvmlGpuFabricInfo_v3 NVML_SIM_STRUCT_VERSION(nvmlGpuFabricInfo_v3_t, 3)

/* ---- layout pins (LP64, x86_64 / aarch64 SysV) ------------------------------ */
#define NVML_SIM_PIN(type, size) _Static_assert(sizeof(type) == (size), #type " size differs from nvml.h")
#define NVML_SIM_OFF(type, field, off) \
    _Static_assert(offsetof(type, field) == (off), #type "." #field " offset differs from nvml.h")

NVML_SIM_PIN(nvmlReturn_t, 4);
NVML_SIM_PIN(nvmlEnableState_t, 4);
NVML_SIM_PIN(nvmlPciInfo_t, 68);
NVML_SIM_OFF(nvmlPciInfo_t, domain, 16);
NVML_SIM_OFF(nvmlPciInfo_t, pciDeviceId, 28);
NVML_SIM_OFF(nvmlPciInfo_t, pciSubSystemId, 32);
NVML_SIM_OFF(nvmlPciInfo_t, busId, 36);
NVML_SIM_PIN(nvmlMemory_t, 24);
NVML_SIM_PIN(nvmlMemory_v2_t, 40);
NVML_SIM_OFF(nvmlMemory_v2_t, total, 8);
NVML_SIM_OFF(nvmlMemory_v2_t, reserved, 16);
NVML_SIM_OFF(nvmlMemory_v2_t, used, 32);
NVML_SIM_PIN(nvmlProcessInfo_t, 24);
NVML_SIM_OFF(nvmlProcessInfo_t, usedGpuMemory, 8);
NVML_SIM_OFF(nvmlProcessInfo_t, gpuInstanceId, 16);
NVML_SIM_OFF(nvmlProcessInfo_t, computeInstanceId, 20);
NVML_SIM_PIN(nvmlGpuInstancePlacement_t, 8);
NVML_SIM_PIN(nvmlGpuInstanceProfileInfo_t, 48);
NVML_SIM_OFF(nvmlGpuInstanceProfileInfo_t, memorySizeMB, 40);
NVML_SIM_PIN(nvmlGpuInstanceProfileInfo_v2_t, 152); /* version word 0x02000098 */
NVML_SIM_OFF(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB, 48);
NVML_SIM_OFF(nvmlGpuInstanceProfileInfo_v2_t, name, 56);
NVML_SIM_PIN(nvmlGpuInstanceInfo_t, 24);
NVML_SIM_OFF(nvmlGpuInstanceInfo_t, placement, 16);
NVML_SIM_PIN(nvmlComputeInstancePlacement_t, 8);
NVML_SIM_PIN(nvmlComputeInstanceProfileInfo_t, 36);
NVML_SIM_PIN(nvmlComputeInstanceProfileInfo_v2_t, 136); /* version word 0x02000088 */
NVML_SIM_OFF(nvmlComputeInstanceProfileInfo_v2_t, name, 40);
NVML_SIM_PIN(nvmlComputeInstanceInfo_t, 32);
NVML_SIM_OFF(nvmlComputeInstanceInfo_t, id, 16);
NVML_SIM_OFF(nvmlComputeInstanceInfo_t, placement, 24);
NVML_SIM_PIN(nvmlValue_t, 8);
NVML_SIM_PIN(nvmlFieldValue_t, 40);
NVML_SIM_OFF(nvmlFieldValue_t, timestamp, 8);
NVML_SIM_OFF(nvmlFieldValue_t, valueType, 24);
NVML_SIM_OFF(nvmlFieldValue_t, nvmlReturn, 28);
NVML_SIM_OFF(nvmlFieldValue_t, value, 32);
NVML_SIM_PIN(nvmlGpuFabricInfo_t, 28);
NVML_SIM_OFF(nvmlGpuFabricInfo_t, status, 16);
NVML_SIM_OFF(nvmlGpuFabricInfo_t, state, 24);
NVML_SIM_PIN(nvmlGpuFabricInfo_v2_t, 36); /* version word 0x02000024 */
NVML_SIM_OFF(nvmlGpuFabricInfo_v2_t, status, 20);
NVML_SIM_OFF(nvmlGpuFabricInfo_v2_t, state, 28);
NVML_SIM_OFF(nvmlGpuFabricInfo_v2_t, healthMask, 32);
NVML_SIM_PIN(nvmlGpuFabricInfo_v3_t, 40); /* version word 0x03000028 */
NVML_SIM_OFF(nvmlGpuFabricInfo_v3_t, healthSummary, 36);

#endif /* NVML_SIM_ABI_H */
