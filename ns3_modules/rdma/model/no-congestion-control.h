/*
 * HeteroSim: no congestion control (line rate).
 */
#ifndef HETEROSIM_NO_CONGESTION_CONTROL_H
#define HETEROSIM_NO_CONGESTION_CONTROL_H

#include "rdma-congestion-control.h"

namespace ns3
{

/**
 * \brief Sends at the queue pair's maximum rate and ignores all feedback; only PFC (or loss
 * recovery) limits it. Used for lossless host links and as the "none" baseline.
 */
class NoCongestionControl : public RdmaCongestionControl
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    NoCongestionControl();
};

} // namespace ns3

#endif /* HETEROSIM_NO_CONGESTION_CONTROL_H */
