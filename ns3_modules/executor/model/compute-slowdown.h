/*
 * HeteroSim: straggler GPUs: compute that runs slower during time windows.
 */
#ifndef HETEROSIM_COMPUTE_SLOWDOWN_H
#define HETEROSIM_COMPUTE_SLOWDOWN_H

#include "ns3/object.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief Per-GPU slowdown windows for compute tasks (a straggler GPU).
 *
 * A window [start, end) with factor k > 0 makes compute on its GPU progress at 1/k of its
 * nominal speed: a task that needs d ns of nominal work and starts at t ends at the time e
 * with integral_t^e 1/k(tau) dtau = d, where k(tau) is the factor in force at tau (1 outside
 * every window). So a task that straddles a window boundary is slowed only for the part that
 * runs inside it. Windows of one GPU must not overlap (the caller merges them, multiplying
 * factors). The end time is rounded to the nearest ns.
 */
class ComputeSlowdown : public Object
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    /** Trace signature of Slowed: GPU, nominal duration (ns), actual duration (ns). */
    typedef void (*SlowedCallback)(int32_t, int64_t, int64_t);

    ComputeSlowdown();

    /**
     * \brief Set the windows (replacing any). Within a GPU, windows sorted by start, disjoint.
     * \param n number of windows
     * \param gpu GPU of each window
     * \param startNs window start, ns
     * \param endNs window end, ns (-1: to the end of the run)
     * \param factor slowdown factor (> 0; 1.5 = 50 % longer)
     */
    void SetWindows(uint32_t n,
                    const int32_t* gpu,
                    const int64_t* startNs,
                    const int64_t* endNs,
                    const double* factor);

    /**
     * \brief Duration of a compute task under the windows.
     * \param gpu the GPU running it
     * \param startNs when it starts, ns
     * \param nominalNs its nominal duration, ns
     * \return its actual duration, ns
     */
    int64_t Stretch(int32_t gpu, int64_t startNs, int64_t nominalNs) const;

    /** \return compute tasks whose duration the windows changed */
    uint64_t GetTasksSlowed() const;
    /** \return time those tasks took beyond their nominal durations, ns */
    int64_t GetExtraNs() const;

  private:
    /** One window. */
    struct Window
    {
        int64_t start; //!< ns
        int64_t end;   //!< ns, -1 = open
        double factor; //!< slowdown
    };

    std::vector<std::vector<Window>> m_windows;              //!< per GPU
    mutable uint64_t m_slowed{0};                            //!< tasks changed
    mutable int64_t m_extraNs{0};                            //!< their extra time
    TracedCallback<int32_t, int64_t, int64_t> m_slowedTrace; //!< gpu, nominal, actual
};

} // namespace ns3

#endif /* HETEROSIM_COMPUTE_SLOWDOWN_H */
