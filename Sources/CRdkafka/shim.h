#ifndef PUSHFAN_CRDKAFKA_SHIM_H
#define PUSHFAN_CRDKAFKA_SHIM_H
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

/* Macros Swift cannot import. */
static inline int32_t pushfan_rdk_partition_unassigned(void) { return RD_KAFKA_PARTITION_UA; }
static inline int pushfan_rdk_msg_f_copy(void) { return RD_KAFKA_MSG_F_COPY; }
static inline int64_t pushfan_rdk_offset_beginning(void) { return RD_KAFKA_OFFSET_BEGINNING; }
static inline int64_t pushfan_rdk_offset_invalid(void) { return RD_KAFKA_OFFSET_INVALID; }

#endif
