/* dtype.c - element sizes and names. */
#include "air/air.h"

size_t air_dtype_size(air_dtype dtype)
{
	switch (dtype) {
	case AIR_F64: case AIR_I64: return 8;
	case AIR_F32: case AIR_I32: return 4;
	case AIR_F16: case AIR_BF16: case AIR_I16: return 2;
	case AIR_I8: case AIR_U8: case AIR_BOOL: return 1;
	default: return 0;
	}
}

const char *air_dtype_name(air_dtype dtype)
{
	static const char *names[AIR_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16", "i64",
						     "i32", "i16", "i8",  "u8",   "bool"};
	return (unsigned)dtype < AIR_DTYPE_COUNT ? names[dtype] : "?";
}

int air_version(void)
{
	return AIR_VERSION_MAJOR * 10000 + AIR_VERSION_MINOR * 100 + AIR_VERSION_PATCH;
}
