/* fuzz_air_load.c - libFuzzer harness over the .air loader (built with
 * -DAIR_FUZZ=ON by clang, -fsanitize=fuzzer,address,undefined; run by
 * scripts/fuzz.sh and, briefly, scripts/test.sh). Each input goes through
 * air_file_exercise.h (open, bind externals, names, rebuild the graph,
 * compile, run) twice: as it is, and with its checksums recomputed, since
 * almost any mutation would otherwise stop at a checksum and never reach
 * the decoder or the graph builder; plus air_model_load_buffer as it is.
 * Seeds: tests/fuzz/corpus (real saved graphs: tests/c/test_air_file_damage DIR
 * writes them). A crash, leak, hang or sanitizer report is a finding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "air_file_exercise.h"
#include "air_file_mutate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	agf_fill();
	agf_max_bytes = (size_t)64 << 20;
	air_set_num_threads(1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)afx_exercise(data, size, 0, NULL);
	air_model *m = NULL;
	if (air_model_load_buffer(data, size, NULL, &m) == AIR_OK)
		air_model_destroy(m);
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	afm_repair(copy, size);
	(void)afx_exercise(copy, size, 0, NULL);
	free(copy);
	return 0;
}
