/*
 * HeteroSim: full-duplex point-to-point link of the RDMA fabric.
 */
#ifndef HETEROSIM_QBB_CHANNEL_H
#define HETEROSIM_QBB_CHANNEL_H

#include "rdma-frame.h"

#include "ns3/channel.h"
#include "ns3/nstime.h"
#include "ns3/ptr.h"

namespace ns3
{

class QbbNetDevice;

/**
 * \brief A point-to-point channel between two QbbNetDevices with a propagation delay.
 *
 * Each direction is independent (full duplex); the rate belongs to the transmitting device.
 */
class QbbChannel : public Channel
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    QbbChannel();

    /**
     * \brief Attach a device (at most two).
     * \param device the device
     */
    void Attach(Ptr<QbbNetDevice> device);

    /**
     * \brief Deliver \p frame to the peer of \p src after \p txTime plus the propagation delay.
     * \param frame the frame
     * \param src the transmitting device
     * \param txTime serialisation time of the frame
     */
    void Transmit(RdmaFrame* frame, const QbbNetDevice* src, Time txTime) const;

    /** \return the propagation delay */
    Time GetDelay() const;

    std::size_t GetNDevices() const override;
    Ptr<NetDevice> GetDevice(std::size_t i) const override;

  protected:
    void DoDispose() override;

  private:
    Time m_delay;               //!< propagation delay
    Ptr<QbbNetDevice> m_dev[2]; //!< the two ends
    std::size_t m_n{0};         //!< devices attached
};

} // namespace ns3

#endif /* HETEROSIM_QBB_CHANNEL_H */
