/*
 * HeteroSim: compute slowed by the communication kernels running beside it on the same GPU.
 */
#ifndef HETEROSIM_COMPUTE_CONTENTION_H
#define HETEROSIM_COMPUTE_CONTENTION_H

#include "narrow-column.h"

#include "ns3/object.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace ns3
{

/**
 * \brief Contention between compute and communication kernels on one GPU.
 *
 * A collective's kernel holds one thread block per channel on every GPU it runs on for as long
 * as it moves data (NCCL); a point-to-point transfer holds a few. While a GPU's communication
 * kernels hold c blocks in all, a compute task on that GPU progresses at 1 / f(c) of its
 * nominal speed, with
 *
 *   f(0) = 1,   f(c) = max(1 + [c > waveAbove] waveTerm, 1 / (1 - min(c * blockShare, MaxShare)))
 *
 * for c > 0, where waveTerm, waveAbove and blockShare are per task (set from Python,
 * heterosim.plan.compute.contention): a tiled kernel whose grid is sized to the GPU's SMs loses
 * part of a wave when some SMs are held (waveTerm), and every kernel loses the SMs or the memory
 * bandwidth the blocks take (blockShare per block). Blocks are counted per collective instance per
 * GPU (a collective's kernel is counted once however many of its flows touch the GPU, from its
 * first flow's start to its last flow's end there); flows without a collective count their own
 * blocks.
 *
 * The plan executor calls FlowStarted / FlowDone and re-times the compute tasks running on a
 * GPU whose factor changed (PlanExecutor::SetComputeContention).
 */
class ComputeContention : public Object
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    /** Trace signature of Contended: GPU, task, nominal ns, actual ns. */
    typedef void (*ContendedCallback)(int32_t, uint32_t, int64_t, int64_t);

    ComputeContention();

    /**
     * \brief Per task: the terms of f (compute tasks; ignored for others).
     * \param n number of tasks (the plan's)
     * \param waveTerm extra share of a wave (>= 0)
     * \param blockShare share of the GPU one block takes (>= 0)
     * \param waveAbove blocks above which the wave term applies (the SMs the task's tiles leave
     * free)
     */
    void SetComputeTerms(uint32_t n,
                         const double* waveTerm,
                         const double* blockShare,
                         const int32_t* waveAbove);

    /**
     * \brief Per task: the blocks a flow's kernel holds and its collective instance.
     * \param n number of tasks (the plan's)
     * \param blocks blocks held on each GPU the flow touches (flows; ignored for others)
     * \param instance collective instance, -1: the flow's own kernel
     */
    void SetFlowBlocks(uint32_t n, const int32_t* blocks, const int32_t* instance);

    /**
     * \brief As SetComputeTerms, but the caller's arrays are kept, not copied: they must stay
     * alive and unchanged until ReleaseTasks() or the model's end.
     * \param n number of tasks (the plan's)
     * \param waveTerm extra share of a wave (>= 0)
     * \param blockShare share of the GPU one block takes (>= 0)
     * \param waveAbove blocks above which the wave term applies
     */
    void BorrowComputeTerms(uint32_t n,
                            const double* waveTerm,
                            const double* blockShare,
                            const int32_t* waveAbove);

    /**
     * \brief As SetFlowBlocks, but the caller's arrays are kept, not copied (lifetime as for
     * BorrowComputeTerms).
     * \param n number of tasks (the plan's)
     * \param blocks blocks held on each GPU the flow touches
     * \param instance collective instance, -1: the flow's own kernel
     */
    void BorrowFlowBlocks(uint32_t n, const int32_t* blocks, const int32_t* instance);

    /**
     * \brief As BorrowFlowBlocks, with the blocks in 8 bits (a plan whose flows hold at most
     * 255 blocks: NCCL's channels; 3 bytes per task less).
     * \param n number of tasks (the plan's)
     * \param blocks blocks held on each GPU the flow touches
     * \param instance collective instance, -1: the flow's own kernel
     */
    void BorrowFlowBlocksNarrow(uint32_t n, const uint8_t* blocks, const int32_t* instance);

    /** \param gpus number of GPUs (sizes the per-GPU state) */
    void SetGpuCount(uint32_t gpus);

    /**
     * \brief A flow started on GPUs \p src and \p dst.
     * \param task the flow
     * \param src sending GPU
     * \param dst receiving GPU
     * \param changed GPUs whose block count changed (appended)
     */
    void FlowStarted(uint32_t task, int32_t src, int32_t dst, std::vector<int32_t>& changed);

    /**
     * \brief A flow finished.
     * \param task the flow
     * \param src sending GPU
     * \param dst receiving GPU
     * \param changed GPUs whose block count changed (appended)
     */
    void FlowDone(uint32_t task, int32_t src, int32_t dst, std::vector<int32_t>& changed);

    /**
     * \param task a compute task
     * \param gpu its GPU
     * \return its slowdown factor now (>= 1)
     */
    double Factor(uint32_t task, int32_t gpu) const;

    /** \param gpu a GPU \return blocks its communication kernels hold now */
    int64_t BlocksOn(int32_t gpu) const;

    /**
     * \brief A compute task finished: account its time beyond nominal.
     * \param gpu its GPU
     * \param task the task
     * \param nominalNs its duration without contention
     * \param actualNs its duration
     */
    void Finished(int32_t gpu, uint32_t task, int64_t nominalNs, int64_t actualNs);

    /** \return extra ns per GPU (index = GPU) */
    const std::vector<int64_t>& GetExtraNs() const;
    /** \return compute tasks slowed per GPU */
    const std::vector<uint64_t>& GetTasksSlowed() const;
    /** \return extra ns of each slowed task (task -> ns; tasks not slowed are absent) */
    const std::unordered_map<uint32_t, int64_t>& GetTaskExtraNs() const;

    /** \return the number of compute tasks slowed (the per-task accounts CopyAccounts copies) */
    uint32_t GetNSlowedTasks() const;

    /**
     * \brief Copy the per-GPU accounts and the slowed tasks' accounts into caller-owned arrays
     * (only the slowed tasks: a plan of millions of tasks with few slowed ones needs no
     * per-task array).
     * \param extraNs per GPU (SetGpuCount values)
     * \param slowed per GPU
     * \param tasks the slowed tasks, ascending (GetNSlowedTasks() values)
     * \param taskExtraNs their extra ns, in the same order
     */
    void CopyAccounts(int64_t* extraNs,
                      uint64_t* slowed,
                      uint32_t* tasks,
                      int64_t* taskExtraNs) const;

    /**
     * \brief Free the per-task terms and accounts once the run is over and the accounts are
     * copied out; the per-GPU accounts stay.
     */
    void ReleaseTasks();

  private:
    /** Add \p delta flows of \p task's kernel on \p gpu. */
    void Touch(uint32_t task, int32_t gpu, int delta, std::vector<int32_t>& changed);

    double m_maxShare;                  //!< cap on c * blockShare
    std::vector<double> m_ownWave;      //!< copies (SetComputeTerms); empty when borrowed
    std::vector<double> m_ownShare;     //!< copies (SetComputeTerms)
    std::vector<int32_t> m_ownAbove;    //!< copies (SetComputeTerms)
    std::vector<int32_t> m_ownBlocks;   //!< copies (SetFlowBlocks)
    std::vector<int32_t> m_ownInstance; //!< copies (SetFlowBlocks)
    std::span<const double> m_wave;     //!< per task
    std::span<const double> m_share;    //!< per task
    std::span<const int32_t> m_above;   //!< per task: blocks above which the wave term applies
    /** Blocks per task: 32-bit, or 8-bit (BorrowFlowBlocksNarrow). */
    using BlockColumn = NarrowColumn<int32_t, uint8_t>;

    BlockColumn m_blocks;                                        //!< per task (flows)
    std::span<const int32_t> m_instance;                         //!< per task (flows)
    std::vector<int64_t> m_gpuBlocks;                            //!< blocks held per GPU now
    std::vector<std::unordered_map<int64_t, uint32_t>> m_active; //!< per GPU: kernel -> flows
    std::vector<int64_t> m_extraNs;                              //!< per GPU
    std::vector<uint64_t> m_slowed;                              //!< per GPU
    uint32_t m_nTasks{0};                                        //!< tasks of the plan
    std::unordered_map<uint32_t, int64_t> m_taskExtra; //!< per slowed task (not per task: memory)
    TracedCallback<int32_t, uint32_t, int64_t, int64_t> m_contendedTrace; //!< per slowed task
};

} // namespace ns3

#endif /* HETEROSIM_COMPUTE_CONTENTION_H */
