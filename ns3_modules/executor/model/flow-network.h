/*
 * HeteroSim: the interface between the plan executor and a network model.
 */
#ifndef HETEROSIM_FLOW_NETWORK_H
#define HETEROSIM_FLOW_NETWORK_H

#include "ns3/callback.h"
#include "ns3/nstime.h"
#include "ns3/object.h"

#include <cstdint>

namespace ns3
{

/**
 * \brief A network that moves point-to-point flows between GPUs on ns-3's clock.
 *
 * The executor calls StartFlow() when a flow's dependencies are met; the network calls the
 * completion callback (once per flow) when the flow's last byte has been delivered to the
 * destination GPU. Two implementations exist: the packet-level RDMA network and the fluid
 * (max-min fair) flow network. GPUs are numbered globally, as in the cluster file.
 */
class FlowNetwork : public Object
{
  public:
    /**
     * \brief Called when a flow finishes: (flow id, finish time).
     */
    typedef Callback<void, uint32_t, Time> FlowDoneCallback;

    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    FlowNetwork();
    ~FlowNetwork() override;

    /**
     * \brief Start moving \p bytes from GPU \p srcGpu to GPU \p dstGpu now.
     * \param flowId caller's id, reported back on completion
     * \param srcGpu global index of the sending GPU
     * \param dstGpu global index of the receiving GPU
     * \param bytes payload size in bytes (> 0)
     * \param priority traffic class (PFC priority) of the flow
     */
    virtual void StartFlow(uint32_t flowId,
                           uint32_t srcGpu,
                           uint32_t dstGpu,
                           uint64_t bytes,
                           uint8_t priority) = 0;

    /**
     * \brief Set the callback invoked when a flow completes.
     * \param cb the callback
     */
    void SetFlowDoneCallback(FlowDoneCallback cb);

    /**
     * \return the number of GPUs this network connects
     */
    virtual uint32_t GetNGpus() const = 0;

  protected:
    /**
     * \brief Report a finished flow to the executor.
     * \param flowId the flow's id as given to StartFlow()
     */
    void NotifyFlowDone(uint32_t flowId);

    void DoDispose() override;

  private:
    FlowDoneCallback m_flowDone; //!< set by the executor
};

} // namespace ns3

#endif /* HETEROSIM_FLOW_NETWORK_H */
