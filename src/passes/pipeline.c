/* pipeline.c - the graph passes in the order they run, in one table. A pass
 * joins the pipeline by adding one row here. Each row says which switch turns
 * it off; after each pass the graph is verified (cheap: shape inference once
 * per node), so a pass that breaks the graph is caught where it ran. */
#include <stdio.h>
#include <time.h>

#include "core/error.h"
#include "core/log.h"
#include "passes/pass.h"

typedef struct pass_row {
	uint32_t id;      /* AIR_PASS_* */
	const char *name;
	bool fusion;      /* also off under AIR_COMPILE_NO_FUSION */
	pass_fn run;      /* NULL: planned, not built yet */
} pass_row;

static air_status run_fuse_elementwise(air_graph *g, const pass_options *po, pass_log *log)
{
	AIR_TRY(pass_fuse_elementwise(g, po->fusion_threshold, log));
	/* then the groups with several tensor inputs or results; the chains
	 * just made join them whole */
	return pass_fuse_dag(g, po->fusion_threshold, log);
}

/* passes/simplify.c */
air_status pass_simplify(air_graph *g, const pass_options *po, pass_log *log);

/* passes/fold_batchnorm.c, passes/fuse_epilogue.c */
air_status pass_fold_batchnorm(air_graph *g, const pass_options *po, pass_log *log);
air_status pass_fuse_epilogue(air_graph *g, const pass_options *po, pass_log *log);

/* passes/fuse_activation.c */
air_status pass_fuse_activation(air_graph *g, const pass_options *po, pass_log *log);

/* passes/fuse_attention.c */
air_status pass_fuse_attention(air_graph *g, const pass_options *po, pass_log *log);

/* passes/fuse_rms_norm.c */
air_status pass_fuse_rms_norm(air_graph *g, const pass_options *po, pass_log *log);

/* passes/fuse_rope.c */
air_status pass_fuse_rope(air_graph *g, const pass_options *po, pass_log *log);

/* passes/attention_views.c */
air_status pass_attention_views(air_graph *g, const pass_options *po, pass_log *log);

/* passes/layout.c */
air_status pass_layout(air_graph *g, const pass_options *po, pass_log *log);

/* passes/narrow_outputs.c */
air_status pass_narrow_outputs(air_graph *g, const pass_options *po, pass_log *log);

static const pass_row PIPELINE[] = {
	{AIR_PASS_SIMPLIFY, "simplify", false, pass_simplify},
	{AIR_PASS_FOLD_BATCHNORM, "fold_batchnorm", false, pass_fold_batchnorm},
	{AIR_PASS_FUSE_ATTENTION, "fuse_attention", true, pass_fuse_attention},
	{AIR_PASS_FUSE_ACTIVATION, "fuse_activation", true, pass_fuse_activation},
	{AIR_PASS_FUSE_RMS_NORM, "fuse_rms_norm", true, pass_fuse_rms_norm},
	{AIR_PASS_FUSE_ROPE, "fuse_rope", true, pass_fuse_rope},
	{AIR_PASS_ATTENTION_VIEWS, "attention_views", true, pass_attention_views},
	{AIR_PASS_FUSE_EPILOGUE, "fuse_epilogue", true, pass_fuse_epilogue},
	{AIR_PASS_NARROW_OUTPUTS, "narrow_outputs", true, pass_narrow_outputs},
	{AIR_PASS_FUSE_ELEMENTWISE, "fuse_elementwise", true, run_fuse_elementwise},
	{AIR_PASS_LAYOUT, "layout", false, pass_layout},
};

const char *air_pass_name(uint32_t pass)
{
	for (size_t i = 0; i < sizeof PIPELINE / sizeof PIPELINE[0]; i++)
		if (PIPELINE[i].id == pass)
			return PIPELINE[i].name;
	return NULL;
}

static uint64_t pipeline_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

air_status pass_run_pipeline(air_graph *g, const pass_options *po, pass_log *log)
{
	if (po->flags & AIR_COMPILE_OP_BY_OP) {
		pass_logf(log, "passes: off (op by op)\n");
		return AIR_OK;
	}
	for (size_t i = 0; i < sizeof PIPELINE / sizeof PIPELINE[0]; i++) {
		const pass_row *p = &PIPELINE[i];
		if (!p->run)
			continue;
		if (po->disabled_passes & p->id) {
			pass_logf(log, "%s: off\n", p->name);
			continue;
		}
		if (p->fusion && (po->flags & AIR_COMPILE_NO_FUSION)) {
			pass_logf(log, "%s: off (enable_operator_fusion=False)\n", p->name);
			continue;
		}
		int before = g->n_nodes;
		uint64_t t0 = pipeline_now_ns();
		AIR_TRY(p->run(g, po, log));
		uint64_t dt = pipeline_now_ns() - t0;
		if (log->n_times < PASS_MAX_TIMES)
			log->times[log->n_times++] = (pass_time){p->name, t0, dt};
		if (air_graph_verify(g) != AIR_OK)
			return air_error_context(AIR_INTERNAL, "the graph is invalid after pass %s", p->name);
		pass_logf(log, "%s: %d -> %d nodes\n", p->name, before, g->n_nodes);
		air_log(AIR_LOG_DEBUG, "pass %s: %d -> %d nodes in %.3f ms", p->name, before, g->n_nodes, dt * 1e-6);
	}
	return AIR_OK;
}
