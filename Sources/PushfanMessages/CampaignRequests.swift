import Foundation
import PushfanAPNsModel
import PushfanSupport

// What a campaign sends, in the APNs model's terms: the APNs model knows requests, payloads
// and their rules; these read a campaign into them.

extension APNsNotification {
    /// The request a campaign sends to one device: its push type, its payload
    /// for the device's locale, `effectivePriority`, `options.expiration` and
    /// `effectiveCollapseID`.
    package init(
        campaign: Campaign, token: DeviceToken, topic: String, locale: String?, apnsID: UUID = APNsNotification.randomID()
    ) throws(APNsRequestError) {
        try self.init(campaign: campaign, token: token, topic: topic, prepared: APNsPreparedPayload(campaign: campaign, locale: locale, marker: nil), apnsID: apnsID)
    }

    /// The same with the payload for the device's locale already prepared, for senders
    /// that send one campaign to many devices (a payload per locale, not per device).
    package init(
        campaign: Campaign, token: DeviceToken, topic: String, prepared: APNsPreparedPayload, apnsID: UUID = APNsNotification.randomID()
    ) throws(APNsRequestError) {
        try self.init(
            token: token, topic: topic, prepared: prepared, expiration: Expiration(epochSeconds: campaign.options.expiration),
            collapseID: campaign.effectiveCollapseID, apnsID: apnsID)
    }
}

extension APNsPreparedPayload {
    /// A campaign's payload for a device locale, with its push type and
    /// `effectivePriority`, and `marker` beside `aps` (its send id a placeholder until
    /// `stamped(sendID:)`, and Notificare's keys when it has them) unless the push type has
    /// no room for one.
    package init(campaign: Campaign, locale: String?, marker: EngagementMarker?) throws(APNsRequestError) {
        guard let priority = APNsNotification.Priority(rawValue: campaign.effectivePriority) else {
            throw .invalidPriority("must be 10, 5 or 1; found \(campaign.effectivePriority)")
        }
        let pushType = campaign.notification.pushType
        var payload = try APNsPayload(notification: campaign.notification, locale: locale)
        guard let marker, EngagementMarker.carried(by: pushType) else {
            try self.init(payload, pushType: pushType, priority: priority)
            return
        }
        if let notificare = marker.notificare {
            for (key, value) in notificare.keys(mediaURL: payload.custom[NotificationTemplate.mediaURLKey]?.stringValue) {
                try payload.setCustom(value, forKey: key)
            }
        }
        try self.init(
            payload, pushType: pushType, priority: priority,
            stampUnder: EngagementMarker.key, length: EngagementMarker.sendIDLength, value: { marker.jsonValue(sendIDFill: $0) })
    }
}

extension APNsPayload {
    /// The payload a campaign sends to a device with this locale: the campaign's
    /// pass-through `aps` with the locale's texts merged in
    /// (`Campaign.Notification.aps(forLocale:)`) and its custom `data` beside it.
    package init(notification: Campaign.Notification, locale: String?) throws(APNsRequestError) {
        try self.init(aps: APS(json: notification.aps(forLocale: locale)), custom: notification.custom)
    }
}

extension Campaign.Notification {
    /// The kind of token this notification goes to: a Live Activity push with
    /// `aps.event: start` goes to push-to-start tokens, any other to running activities'.
    package var tokenKind: APNsTokenKind {
        APNsTokenKind(pushType: pushType, startsActivity: aps?["event"]?.stringValue == "start")
    }
}
