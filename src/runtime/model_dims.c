/* model_dims.c - a compiled model's dims as text, so that a tool holding
 * only the model (the `air` CLI, after air_model_load_file) can name the
 * symbolic dims air_model_input_info reports ("batch", "seq*2"). */
#include "air/air.h"
#include "core/error.h"
#include "runtime/model.h"

air_status air_model_dim_string(const air_model *model, air_dim dim, char *buf, size_t size)
{
	if (!model)
		return air_error(AIR_INVALID_ARGUMENT, "air_model_dim_string: model is NULL");
	return air_graph_dim_string(model->g, dim, buf, size);
}
